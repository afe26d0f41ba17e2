package predict

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// barRefresh is how often the bar is redrawn at most.
const barRefresh = 100 * time.Millisecond

// track starts the bar of a loop of total units (tiles, slices, files,
// samples), named by what, on p.Progress: its count, elapsed time and ETA,
// as training's bar shows them. It returns at, which says how many units
// are done (a loop calls it as each unit starts), and done, which clears
// the bar. Without p.Progress, for fewer than two
// units, or inside a loop that already draws one (the files of a folder
// around each file's tiles), both do nothing: one bar per command at a
// time, the outermost loop's.
func (p *Predictor) track(total int, what string) (at func(n int), done func()) {
	if p.Progress == nil || p.bar != nil || total < 2 {
		return func(int) {}, func() {}
	}
	bar := progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.Progress),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true), // the ETA
		progressbar.OptionSetWidth(20),
		progressbar.OptionThrottle(barRefresh),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true), // at once: the loop has begun
	)
	p.bar = bar
	return func(n int) { _ = bar.Set(n) }, func() {
		_ = bar.Finish()
		p.bar = nil
	}
}

// aboveBar is a writer of notes that clears p's bar, where one is drawn,
// before each note, so that the note is a line of its own above the bar
// (redrawn as the loop goes on) rather than the bar's tail.
type aboveBar struct {
	p *Predictor
	w io.Writer
}

func (a aboveBar) Write(b []byte) (int, error) {
	if a.p.bar != nil {
		_ = a.p.bar.Clear()
	}
	return a.w.Write(b)
}
