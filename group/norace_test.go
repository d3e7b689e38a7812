//go:build !race

package group_test

// raceBuild reports a -race build: the largest simulations shrink.
const raceBuild = false
