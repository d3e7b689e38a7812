//go:build race

package stack_test

// raceBuild reports a -race build: the largest simulations shrink.
const raceBuild = true
