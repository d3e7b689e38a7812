package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestExposition(t *testing.T) {
	var s Set
	c := s.Counter("x_total", "Things.")
	c.Add(3)
	s.Gauge("y", "Now.", func() int64 { return 7 })
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	want := "# HELP x_total Things.\n# TYPE x_total counter\nx_total 3\n# HELP y Now.\n# TYPE y gauge\ny 7\n"
	if string(body) != want || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("got %q", body)
	}
}
