package group_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// dnsServer is a DNS server on loopback UDP that answers A, AAAA and SRV
// questions from its tables (NXDOMAIN for a name it does not know), and
// counts the questions it was asked.
type dnsServer struct {
	conn net.PacketConn
	mu   sync.Mutex
	a    map[string][]netip.Addr // name. → addresses
	srv  map[string][]net.SRV    // _service._proto.name. → records
	asks map[string]int          // name. → questions
}

func newDNSServer(t *testing.T) *dnsServer {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: c, a: map[string][]netip.Addr{}, srv: map[string][]net.SRV{}, asks: map[string]int{}}
	t.Cleanup(func() { c.Close() })
	go s.serve()
	return s
}

// resolver resolves through s only.
func (s *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.conn.LocalAddr().String())
	}}
}

// setA and setSRV set the answers for name.
func (s *dnsServer) setA(name string, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range addrs {
		s.a[name] = append(s.a[name], netip.MustParseAddr(a))
	}
}

func (s *dnsServer) setSRV(name string, recs ...net.SRV) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv[name] = recs
}

func (s *dnsServer) asked(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asks[name]
}

func (s *dnsServer) serve() {
	buf := make([]byte, 512)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if out := s.answer(buf[:n]); out != nil {
			s.conn.WriteTo(out, from)
		}
	}
}

// answer builds the response to query q (RFC 1035 §4.1), nil if q is
// malformed: the header, the question copied, then the answers, each
// naming the question by a pointer to offset 12.
func (s *dnsServer) answer(q []byte) []byte {
	if len(q) < 12 {
		return nil
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, strings.ToLower(string(q[i+1:i+1+l])))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	name := strings.Join(labels, ".") + "."
	qtype := binary.BigEndian.Uint16(q[i+1:])
	question := q[12 : i+5]

	s.mu.Lock()
	s.asks[name]++
	addrs, hasA := s.a[name]
	recs, hasSRV := s.srv[name]
	s.mu.Unlock()
	var answers [][]byte
	rr := func(typ uint16, rdata []byte) {
		b := binary.BigEndian.AppendUint16(nil, 0xC00C) // the question's name
		b = binary.BigEndian.AppendUint16(b, typ)
		b = binary.BigEndian.AppendUint16(b, 1) // IN
		b = binary.BigEndian.AppendUint32(b, 5) // TTL
		b = binary.BigEndian.AppendUint16(b, uint16(len(rdata)))
		answers = append(answers, append(b, rdata...))
	}
	switch qtype {
	case 1, 28: // A, AAAA
		for _, a := range addrs {
			if a.Is4() == (qtype == 1) {
				rr(qtype, a.AsSlice())
			}
		}
	case 33: // SRV
		for _, r := range recs {
			b := binary.BigEndian.AppendUint16(nil, r.Priority)
			b = binary.BigEndian.AppendUint16(b, r.Weight)
			b = binary.BigEndian.AppendUint16(b, r.Port)
			for _, l := range strings.Split(strings.TrimSuffix(r.Target, "."), ".") {
				b = append(append(b, byte(len(l))), l...)
			}
			rr(qtype, append(b, 0))
		}
	}
	flags := uint16(0x8180) // a response, recursion desired and available
	if !hasA && !hasSRV {
		flags |= 3 // NXDOMAIN
	}
	out := binary.BigEndian.AppendUint16(nil, binary.BigEndian.Uint16(q))
	out = binary.BigEndian.AppendUint16(out, flags)
	out = binary.BigEndian.AppendUint16(out, 1)
	out = binary.BigEndian.AppendUint16(out, uint16(len(answers)))
	out = append(out, 0, 0, 0, 0)
	out = append(out, question...)
	for _, a := range answers {
		out = append(out, a...)
	}
	return out
}

func portOf(t *testing.T, addr string) uint16 {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return ap.Port()
}

// TestDNSSeeds: nodes found through the A records of a name at a port,
// and through SRV records (target and port each), join the group.
func TestDNSSeeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dns := newDNSServer(t)
	res := dns.resolver()

	a, err := group.New(ctx, testConfig(1, group.DetectorBRR))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	dns.setA("nodes.group.test.", "127.0.0.1")
	cfg := testConfig(2, group.DetectorBRR)
	cfg.Seeds = group.DNSSeeds{Host: "nodes.group.test", Port: int(portOf(t, a.Addr())), Resolver: res}
	b, err := group.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	waitView(t, a.Views(), "a with b", members(1, 2))
	if n := dns.asked("nodes.group.test."); n == 0 {
		t.Fatal("the DNS server was not asked for nodes.group.test")
	}

	// SRV: a at its port, b at its own; a third node finds both.
	dns.setSRV("_gossip._tcp.nodes.group.test.",
		net.SRV{Target: "localhost.group.test.", Port: portOf(t, b.Addr()), Priority: 10},
		net.SRV{Target: "localhost.group.test.", Port: portOf(t, a.Addr()), Priority: 10})
	dns.setA("localhost.group.test.", "127.0.0.1")
	srv := group.SRVSeeds{Service: "gossip", Proto: "tcp", Name: "nodes.group.test", Resolver: res}
	got, err := srv.Seeds(ctx)
	want := []string{"localhost.group.test:" + strings.Split(a.Addr(), ":")[1], "localhost.group.test:" + strings.Split(b.Addr(), ":")[1]}
	slices.Sort(want)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("SRV seeds %v, %v; want %v", got, err, want)
	}
	// The seeds' names resolve through the test's server only: dial them
	// by address.
	cfg = testConfig(3, group.DetectorBRR)
	cfg.Seeds = group.SRVSeeds{Service: "gossip", Proto: "tcp", Name: "nodes.group.test", Resolver: srvByAddr{res}}
	c, err := group.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	waitView(t, a.Views(), "a with b and c", members(1, 2, 3))
}

// srvByAddr answers SRV questions with the targets' addresses in place of
// their names (the transport dials through the system's resolver, which
// does not know the test's names).
type srvByAddr struct{ *net.Resolver }

func (r srvByAddr) LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error) {
	cname, recs, err := r.Resolver.LookupSRV(ctx, service, proto, name)
	for _, rec := range recs {
		addrs, err := r.Resolver.LookupHost(ctx, rec.Target)
		if err != nil {
			return "", nil, err
		}
		rec.Target = addrs[0]
	}
	return cname, recs, err
}

// fakeResolver answers from tables, for the error cases.
type fakeResolver struct {
	hosts map[string][]string
	srv   map[string][]*net.SRV
}

func (f fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	if h, ok := f.hosts[host]; ok {
		return h, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (f fakeResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	if r, ok := f.srv["_"+service+"._"+proto+"."+name]; ok {
		return name, r, nil
	}
	return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

func TestDNSSeedsErrors(t *testing.T) {
	ctx := context.Background()
	f := fakeResolver{
		hosts: map[string][]string{"empty": {}, "two": {"10.0.0.2", "10.0.0.1", "10.0.0.2", "fd00::1"}},
		srv: map[string][]*net.SRV{
			"_g._tcp.empty": {{Target: ".", Port: 1}},
			"_g._tcp.three": {
				{Target: "c.", Port: 7, Priority: 2}, {Target: "b.", Port: 7, Priority: 1},
				{Target: "a.", Port: 8, Priority: 1}, {Target: "a.", Port: 8, Priority: 2},
			},
		},
	}
	got, err := group.DNSSeeds{Host: "two", Port: 7950, Resolver: f}.Seeds(ctx)
	if want := []string{"10.0.0.1:7950", "10.0.0.2:7950", "[fd00::1]:7950"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("DNSSeeds: %v, %v; want %v", got, err, want)
	}
	got, err = group.SRVSeeds{Service: "g", Proto: "tcp", Name: "three", Resolver: f}.Seeds(ctx)
	if want := []string{"a:8", "b:7", "c:7"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("SRVSeeds: %v, %v; want %v (priority, then name; once each)", got, err, want)
	}
	for _, c := range []struct {
		src  group.SeedSource
		want string
	}{
		{group.DNSSeeds{Port: 1, Resolver: f}, "Host is empty"},
		{group.DNSSeeds{Host: "two", Resolver: f}, "Port 0"},
		{group.DNSSeeds{Host: "two", Port: 70000, Resolver: f}, "Port 70000"},
		{group.DNSSeeds{Host: "none", Port: 1, Resolver: f}, "no such host"},
		{group.DNSSeeds{Host: "empty", Port: 1, Resolver: f}, "has no address"},
		{group.SRVSeeds{Service: "g", Proto: "tcp", Resolver: f}, "Name is empty"},
		{group.SRVSeeds{Service: "g", Name: "three", Resolver: f}, "both be set"},
		{group.SRVSeeds{Service: "g", Proto: "tcp", Name: "none", Resolver: f}, "no such host"},
		{group.SRVSeeds{Service: "g", Proto: "tcp", Name: "empty", Resolver: f}, "no SRV record"},
	} {
		if _, err := c.src.Seeds(ctx); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.src, err, c.want)
		}
	}
	// New reports a failing source as no seed reachable.
	cfg := testConfig(1, group.DetectorBRR)
	cfg.Seeds = group.DNSSeeds{Host: "none", Port: 1, Resolver: f}
	if _, err := group.New(ctx, cfg); !errors.Is(err, group.ErrNoSeed) {
		t.Errorf("New with a name that does not resolve: %v, want ErrNoSeed", err)
	}
}
