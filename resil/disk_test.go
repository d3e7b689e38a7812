package resil

import (
	"errors"
	"os"
	"slices"
	"testing"
)

func TestDiskRoundTrip(t *testing.T) {
	b := encodeDisk(4, 7, []byte("state"))
	n, e, state, err := decodeDisk(b)
	if err != nil || n != 4 || e != 7 || string(state) != "state" {
		t.Fatalf("got %d %d %q %v", n, e, state, err)
	}
	b[len(diskMagic)+30] ^= 1 // in the state
	if _, _, _, err := decodeDisk(b); !errors.Is(err, ErrDisk) {
		t.Fatalf("an altered file: %v, want ErrDisk", err)
	}
	if _, _, _, err := decodeDisk(b[:10]); !errors.Is(err, ErrDisk) {
		t.Fatalf("a short file: %v, want ErrDisk", err)
	}
}

func FuzzDecodeDisk(f *testing.F) {
	f.Add(encodeDisk(2, 1, []byte("x")))
	f.Add([]byte(diskMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, e, state, err := decodeDisk(b); err == nil {
			if again := encodeDisk(n, e, state); string(again) != string(b) {
				t.Fatalf("decoded %d %d %q from a file that does not encode back", n, e, state)
			}
		}
	})
}

// A rank keeps its last two epochs on disk; a torn file or one of another
// job's size is not read.
func TestDiskKeepsTwoEpochs(t *testing.T) {
	dir := t.TempDir()
	for e := 1; e <= 4; e++ {
		if err := writeDiskCopy(dir, 1, 3, e, []byte{byte(e)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeDiskCopy(dir, 2, 3, 1, []byte("other rank")); err != nil {
		t.Fatal(err)
	}
	epochs, err := readDiskEpochs(dir, 1)
	slices.Sort(epochs)
	if err != nil || !slices.Equal(epochs, []int{3, 4}) {
		t.Fatalf("rank 1's epochs %v, %v; want [3 4]", epochs, err)
	}
	if b, ok := readDiskCopy(dir, 1, 3, 4); !ok || b[0] != 4 {
		t.Fatalf("epoch 4: %v %v", b, ok)
	}
	if _, ok := readDiskCopy(dir, 1, 5, 4); ok {
		t.Fatal("a file of a job of 3 ranks read for a job of 5")
	}
	if err := os.WriteFile(diskPath(dir, 1, 4), []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := readDiskCopy(dir, 1, 3, 4); ok {
		t.Fatal("a torn file read")
	}
}
