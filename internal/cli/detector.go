package cli

import "github.com/cohort-mp/cohort/internal/runner"

// detectorHelp is the help of the --detector flag of the commands that
// start a job (run, chaos, cluster); the figures are in
// docs/PERFORMANCE.md, "Choice of the default detector".
const detectorHelp = "failure `detector`: heartbeat, brr or dbrr. heartbeat agrees on a crash several times sooner than brr (median 0.27 s against 2.0 s for 128 processes on 2 cores; 0.13-0.16x memberlist's time against 0.6x), declares fewer live members failed under partial partitions, and its messages do not grow with the job as a gossip table (2n bytes) does (docs/PERFORMANCE.md)"

// defaultDetector is the name of the detector a job gets without
// --detector.
var defaultDetector = runner.DefaultDetector.String()
