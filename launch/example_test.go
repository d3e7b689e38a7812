package launch_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/cohort-mp/cohort/launch"
)

// A launcher's rendezvous and two ranks registering with it, in one
// process: each rank gets every rank's address, indexed by rank.
func ExampleRendezvous() {
	secret := []byte("a job secret of at least 16 bytes")
	rz, err := launch.NewRendezvous(launch.RendezvousConfig{JobID: "example", Secret: secret, Size: 2})
	if err != nil {
		panic(err)
	}
	defer rz.Close()
	var wg sync.WaitGroup
	tables := make([][]string, 2)
	for rank := range 2 {
		wg.Go(func() {
			boot := launch.Bootstrap{JobID: "example", Rank: rank, Size: 2, Rendezvous: rz.Addr(), Secret: secret}
			reg, err := boot.Register(context.Background(), fmt.Sprintf("127.0.0.1:%d", 7000+rank))
			if err != nil {
				panic(err)
			}
			defer reg.Close()
			tables[rank] = reg.Addrs
		})
	}
	wg.Wait()
	fmt.Println(tables[0])
	fmt.Println(tables[1])
	// Output:
	// [127.0.0.1:7000 127.0.0.1:7001]
	// [127.0.0.1:7000 127.0.0.1:7001]
}

// FromEnv tells a program started by hand from one started by a
// launcher.
func ExampleFromEnv() {
	env := map[string]string{} // as if started by hand
	_, err := launch.FromEnv(func(k string) string { return env[k] })
	fmt.Println(err == launch.ErrNotLaunched)
	env[launch.EnvRank] = "x"
	_, err = launch.FromEnv(func(k string) string { return env[k] })
	fmt.Println(err)
	// Output:
	// true
	// launch: bad bootstrap: COHORT_JOB_ID is not set (but other COHORT_ variables are)
}
