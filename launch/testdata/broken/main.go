// Command broken does not compile: the tests of `cohort run` check that a
// build failure of the Go package is shown and fails the run.
package main

func main() {
	var n int = "not a number"
	_ = n
}
