package runner

// SetPickAddrs replaces how a launch picks its nodes' addresses (with
// FreeAddrs as the usual choice) until the returned restore is called.
func SetPickAddrs(f func(n int) ([]string, error)) (restore func()) {
	old := pickAddrs
	pickAddrs = f
	return func() { pickAddrs = old }
}

// FreeAddrs is the usual choice of addresses.
var FreeAddrs = freeAddrs
