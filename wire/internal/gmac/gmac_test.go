package gmac

import (
	"crypto/aes"
	"crypto/cipher"
	"flag"
	"math/rand/v2"
	"testing"
)

var seed = flag.Uint64("seed", 1, "seed of the random keys, nonces and data")

// reference is crypto/cipher's GMAC.
func reference(t testing.TB, key []byte, nonce *[NonceSize]byte, data []byte) []byte {
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return aead.Seal(nil, nonce[:], nil, data)
}

// TestSumMatchesCryptoCipher compares tags with crypto/cipher's over
// every length up to 1,100 bytes (every tail after 0 to 4 groups of 16
// blocks) and a few large ones, with keys and nonces drawn from the seed.
func TestSumMatchesCryptoCipher(t *testing.T) {
	t.Logf("seed %d (replay with -seed %d); fast GHASH: %v", *seed, *seed, fast)
	rng := rand.New(rand.NewPCG(*seed, 7))
	lengths := []int{1 << 20, 1<<20 + 7, 4<<20 + 256}
	for n := 0; n <= 1100; n++ {
		lengths = append(lengths, n)
	}
	data := make([]byte, 4<<20+256)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for i, n := range lengths {
		key := make([]byte, []int{16, 24, 32}[i%3])
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		var nonce [NonceSize]byte
		for j := range nonce {
			nonce[j] = byte(rng.Uint32())
		}
		m, err := New(key)
		if err != nil {
			t.Fatal(err)
		}
		off := rng.IntN(64) // unaligned too
		d := data[off:][:min(n, len(data)-off)]
		var tag [TagSize]byte
		m.Sum(&tag, &nonce, d)
		want := reference(t, key, &nonce, d)
		if string(tag[:]) != string(want) {
			t.Fatalf("%d bytes: tag %x, crypto/cipher's %x", len(d), tag, want)
		}
		if !m.Verify(&nonce, d, want) {
			t.Fatalf("%d bytes: Verify refuses crypto/cipher's tag", len(d))
		}
		prefix := []byte("before")
		if got := m.AppendSum(prefix, nonce[:], d); string(got) != "before"+string(want) {
			t.Fatalf("%d bytes: AppendSum gives %x, want %q then crypto/cipher's %x", len(d), got, prefix, want)
		}
		if !m.Check(nonce[:], d, want) {
			t.Fatalf("%d bytes: Check refuses crypto/cipher's tag", len(d))
		}
		if m.Check(nonce[:], d, want[:TagSize-1]) || m.Check(nonce[:], d, append(want[:TagSize:TagSize], 0)) {
			t.Fatalf("%d bytes: Check takes a tag of the wrong length", len(d))
		}
		if len(d) > 0 {
			d[len(d)/2] ^= 1
			if m.Verify(&nonce, d, want) {
				t.Fatalf("%d bytes: Verify takes the tag of other data", len(d))
			}
			if m.Check(nonce[:], d, want) {
				t.Fatalf("%d bytes: Check takes the tag of other data", len(d))
			}
			d[len(d)/2] ^= 1
		}
	}
}

// A Hash given the data in pieces of any sizes gives the tag Sum gives.
func TestHashInPieces(t *testing.T) {
	if !Fast() {
		t.Skip("no fast GHASH on this processor")
	}
	t.Logf("seed %d (replay with -seed %d)", *seed, *seed)
	rng := rand.New(rand.NewPCG(*seed, 8))
	m, err := New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 70_000)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var nonce [NonceSize]byte
	for _, n := range []int{0, 1, 255, 256, 257, 4096, 65_537, len(data)} {
		want := reference(t, make([]byte, 32), &nonce, data[:n])
		for range 20 {
			var h Hash
			m.Start(&h)
			for rest := data[:n]; len(rest) > 0; {
				k := min(len(rest), 1+rng.IntN([]int{3, 300, 5000}[rng.IntN(3)]))
				h.Write(rest[:k])
				rest = rest[k:]
			}
			var tag [TagSize]byte
			h.Sum(&tag, &nonce)
			if string(tag[:]) != string(want) {
				t.Fatalf("%d bytes in pieces: tag %x, crypto/cipher's %x", n, tag, want)
			}
		}
	}
}

// FuzzSum compares tags with crypto/cipher's.
func FuzzSum(f *testing.F) {
	f.Add(make([]byte, 32), make([]byte, NonceSize), []byte("record"))
	f.Add(make([]byte, 16), make([]byte, NonceSize), make([]byte, 600))
	f.Fuzz(func(t *testing.T, key, nonceBytes, data []byte) {
		if len(key) != 16 && len(key) != 24 && len(key) != 32 || len(nonceBytes) != NonceSize {
			return
		}
		nonce := [NonceSize]byte(nonceBytes)
		m, err := New(key)
		if err != nil {
			t.Fatal(err)
		}
		var tag [TagSize]byte
		m.Sum(&tag, &nonce, data)
		if want := reference(t, key, &nonce, data); string(tag[:]) != string(want) {
			t.Fatalf("tag %x, crypto/cipher's %x", tag, want)
		}
	})
}

func BenchmarkSum(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
	}{{"n=40", 40}, {"n=16K", 16 << 10}, {"n=1M", 1 << 20}} {
		data := make([]byte, c.n)
		var nonce [NonceSize]byte
		var tag [TagSize]byte
		b.Run(c.name+"/gmac", func(b *testing.B) {
			m, _ := New(make([]byte, 32))
			b.SetBytes(int64(c.n))
			for b.Loop() {
				m.Sum(&tag, &nonce, data)
			}
		})
		b.Run(c.name+"/crypto-cipher", func(b *testing.B) {
			block, _ := aes.NewCipher(make([]byte, 32))
			aead, _ := cipher.NewGCM(block)
			b.SetBytes(int64(c.n))
			for b.Loop() {
				aead.Seal(tag[:0], nonce[:], nil, data)
			}
		})
		// What a record that also hid its bytes would cost: AES-GCM
		// encrypting them.
		b.Run(c.name+"/aes-gcm-encrypt", func(b *testing.B) {
			block, _ := aes.NewCipher(make([]byte, 32))
			aead, _ := cipher.NewGCM(block)
			out := make([]byte, 0, c.n+TagSize)
			b.SetBytes(int64(c.n))
			for b.Loop() {
				out = aead.Seal(out[:0], nonce[:], data, nil)
			}
		})
	}
}

// ghash32 over pairs of groups leaves the running hash where ghash16
// over the same groups does, from any running hash: the two loops'
// products, reductions and Karatsuba's middle terms agree.
func TestGhash32MatchesGhash16(t *testing.T) {
	if !Fast() {
		t.Skip("no fast GHASH on this processor")
	}
	t.Logf("seed %d (replay with -seed %d)", *seed, *seed)
	rng := rand.New(rand.NewPCG(*seed, 32))
	for range 50 {
		key := make([]byte, 32)
		for i := range key {
			key[i] = byte(rng.Uint32())
		}
		m, err := New(key)
		if err != nil {
			t.Fatal(err)
		}
		pairs := 1 + rng.IntN(8)
		data := make([]byte, pairs*512)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		start := [2]uint64{rng.Uint64(), rng.Uint64()}
		got, want := start, start
		ghash32(&got, &m.tab, &data[0], pairs)
		ghash16(&want, m.powers16(), &data[0], 2*pairs)
		if got != want {
			t.Fatalf("%d pairs from %x: ghash32 gives %x, ghash16 %x", pairs, start, got, want)
		}
	}
}

// A small input's tag is made and checked without an allocation: a
// relayed frame of a few bytes pays for one otherwise (package wire).
func TestSmallSumAllocatesNothing(t *testing.T) {
	m, err := New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	nonce, data := make([]byte, NonceSize), make([]byte, 100)
	b := make([]byte, 0, TagSize)
	allocs := testing.AllocsPerRun(100, func() {
		b = m.AppendSum(b[:0], nonce, data)
		if !m.Check(nonce, data, b) {
			t.Fatal("Check refuses AppendSum's tag")
		}
	})
	if allocs != 0 {
		t.Fatalf("AppendSum and Check of %d bytes: %v allocations, want 0", len(data), allocs)
	}
}

// Sum and Verify allocate nothing either, under smallFrom bytes (GCM's
// path) and from it on (the fast GHASH's): a record's tag is sealed and
// opened with them.
func TestSumVerifyDoNotAllocate(t *testing.T) {
	m, err := New(make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	// Held by a pointer, as a record's sealer and opener hold theirs.
	type state struct {
		nonce [NonceSize]byte
		tag   [TagSize]byte
	}
	s := new(state)
	for _, n := range []int{8, 100, smallFrom, 3000} {
		data := make([]byte, n)
		allocs := testing.AllocsPerRun(100, func() {
			m.Sum(&s.tag, &s.nonce, data)
			if !m.Verify(&s.nonce, data, s.tag[:]) {
				t.Fatal("Verify refuses Sum's tag")
			}
		})
		if allocs != 0 {
			t.Errorf("Sum and Verify of %d bytes: %v allocations, want 0", n, allocs)
		}
	}
}
