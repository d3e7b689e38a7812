module github.com/cohort-mp/cohort/examples/groupcache

go 1.26.0

require (
	github.com/cohort-mp/cohort v0.0.0
	github.com/golang/groupcache v0.0.0-20241129210726-2c02b8208cf8
)

require (
	github.com/golang/protobuf v1.5.4 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.33.0 // indirect
)

replace github.com/cohort-mp/cohort => ../..
