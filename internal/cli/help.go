package cli

import "context"

func init() {
	register(&command{
		name:     "help",
		synopsis: "[command]",
		summary:  "show the commands, or the flags and examples of one command",
		help: `Help lists the commands, or describes one.

Examples:
  cohort help
  cohort help demo
  cohort help sim`,
		run: runHelp,
	})
}

func runHelp(ctx context.Context, c *call) error {
	fs := c.newFlags()
	if err := c.parse(fs, c.args, 1); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		writeMainUsage(c.stdout)
		return nil
	}
	name := fs.Arg(0)
	cmd, ok := commands[name]
	if !ok {
		return usagef("unknown command %q", name)
	}
	// Show the command's usage with its flags, as -h would.
	return cmd.run(ctx, &call{cmd: cmd, args: []string{"-h"}, stdout: c.stdout, stderr: c.stderr})
}
