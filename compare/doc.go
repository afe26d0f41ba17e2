// Package compare measures memunet's variants side by side: each variant
// (and plain gorgonia) trains for a few steps in a child process of its
// own, so that its peak RSS is its own, and its run files become a row of
// compare's table; Runs puts existing runs' validation curves together.
// RunGorgonia is the reference row's run: the same UNet, weights, data
// order and Adam as plain gorgonia would train it (model/oracle), in the
// child that memunet gorgonia starts.
//
// Invariants:
//   - One writer per folder: a compare holds outdir's lock on its folder
//     from New to Close (Runs for as long as it writes), so a second
//     compare, or any run, into the same folder is refused by name.
//     RunGorgonia likewise holds its --out, and refuses one that holds a
//     run; only its own earlier summary.json there is replaced.
//   - A folder that holds an earlier compare (its files, or a variant's
//     run) is refused unless Options.Force (UsedError), since every child
//     runs train --force in Dir/<variant>.
//   - No child outlives a compare: a stop (Options.Stop, memunet
//     compare's SIGINT/SIGTERM) is passed on to the running child, which
//     runs in a process group of its own (childAttr; on Linux it also
//     gets SIGTERM should compare die), and Run waits for it.
//   - A row says what its child did: a child that fails, or stops before
//     its steps are done, is a failed row with the reason, never a row
//     read from a partial or earlier run.
//   - Everything written goes through package report (the table, CSV,
//     JSON and charts) and outdir.WriteFile.
//
// The package keeps no state between calls; a Compare owns its lock.
package compare
