package cli

import "github.com/cohort-mp/cohort/internal/runner"

// detectorHelp is the help of the --detector flag of the commands that
// start a job (run, chaos, cluster); the figures are in
// docs/PERFORMANCE.md, "Choice of the default detector".
const detectorHelp = "failure `detector`: heartbeat, brr or dbrr. heartbeat agrees on a crash sooner than brr (median 0.8 s against 3.8 s for 128 processes on 2 cores with a load average of 4 to 121; 0.13-0.16x memberlist's time against 0.6x), declares fewer live members failed when links between hosts break or the machine is overloaded (its waits grow with the stalls it sees), and sends each process's heartbeat to 2 others whatever the job's size, where a gossip table grows with it (2n bytes); brr waits 2 log2 n gossip rounds before declaring, more after stalls it has seen (docs/PERFORMANCE.md)"

// defaultDetector is the name of the detector a job gets without
// --detector.
var defaultDetector = runner.DefaultDetector.String()
