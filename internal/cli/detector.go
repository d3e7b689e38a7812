package cli

import "github.com/cohort-mp/cohort/internal/runner"

// detectorHelp is the help of the --detector flag of the commands that
// start a job (run, chaos, cluster); the figures are in
// docs/PERFORMANCE.md, "Choice of the default detector".
const detectorHelp = "failure `detector`: heartbeat, brr or dbrr. heartbeat agrees on a crash several times sooner than brr (median 0.27 s against 2.0 s for 128 processes on 2 cores, 1.1 s against 2.4 s with a load average of 50 to 120; 0.13-0.16x memberlist's time against 0.6x), declares fewer live members failed when links between hosts break, and sends each process's heartbeat to 2 others whatever the job's size, where a gossip table grows with it (2n bytes); brr waits longer before declaring (2 log2 n gossip rounds), which a process starved for over a second on an overloaded machine survives more often (docs/PERFORMANCE.md)"

// defaultDetector is the name of the detector a job gets without
// --detector.
var defaultDetector = runner.DefaultDetector.String()
