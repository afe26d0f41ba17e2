// Package report turns what memunet measured into what a user reads: every
// chart and its PNG (a run's curves.png, compare's memory.png and
// timeline.png, compare --runs' val-curves.png), compare's table,
// compare.csv and compare.json, the train, eval, plan and bench text
// tables, and the timeline.json a run writes for its last step.
//
// Invariants:
//   - One look: one palette (Tableau 10), one font (Liberation Sans), grid
//     lines in one grey, legends outside the data, ticks at round values.
//   - One writer: every file goes through outdir.WriteFile, so it appears
//     whole or not at all and a symlink planted at its name is replaced,
//     never written through.
//   - Layout is computed apart from drawing (the *Layout and *Plots
//     functions) so that tests check axes, panels and legends, not pixels.
//   - Values that a chart cannot place (NaN, ±Inf; ≤ 0 on a log axis) are
//     left out of the lines, never an error that would fail a run.
//
// The package keeps no state; the caller owns every value passed in, and
// nothing is kept after a call returns. It reads no run files: rundir and
// compare read them and hand the values over.
package report
