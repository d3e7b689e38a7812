//go:build !amd64

package gmac

const fast = false

func gfMul(y, h *[2]uint64) { panic("gmac: no fast GHASH here") }

func ghash16(y *[2]uint64, powers *[16][2]uint64, data *byte, groups int) {
	panic("gmac: no fast GHASH here")
}

func ghash32(y *[2]uint64, t *table, data *byte, pairs int) {
	panic("gmac: no fast GHASH here")
}
