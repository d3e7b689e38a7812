//go:build !linux

package comm

// bindCPUs does nothing here: binding is implemented on Linux.
func bindCPUs(addrs []string, self int, set []int) []int { return nil }
