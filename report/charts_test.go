package report

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chartRow is a memunet variant's row with its pool peak split by category
// (in MiB: params, grads, optimizer, activations, workspace) and its
// reserved and RSS peaks.
func chartRow(name string, v config.Variant, cats [5]float64, reservedMiB, rssMiB float64) CompareRow {
	r := CompareRow{Name: name, Variant: v, Pool: true, PeakByCategory: map[string]int64{}, Params: 122492,
		PeakReservedBytes: int64(reservedMiB * (1 << 20)), PeakRSSBytes: int64(rssMiB * (1 << 20)), StepMSMedian: 10}
	for i, c := range memory.Categories() {
		b := int64(cats[i] * (1 << 20))
		r.PeakByCategory[c.String()] = b
		r.PeakAllocatedBytes += b
	}
	return r
}

// syntheticRows are baseline, checkpoint, accum4 and all, a failed row and
// plain gorgonia, whose RSS is 20 times the largest pool bar.
func syntheticRows() []CompareRow {
	base := config.Variant{MicroBatch: 8, Accumulate: 1, Precision: backend.Float32}
	ckpt := base
	ckpt.Checkpoint = config.Checkpoint{All: true}
	acc := base
	acc.MicroBatch, acc.Accumulate = 2, 4
	all := acc
	all.Precision, all.Checkpoint = backend.Float16, config.Checkpoint{All: true}
	rows := []CompareRow{
		chartRow("baseline", base, [5]float64{0.5, 0.5, 1, 5.5, 0.04}, 11.3, 41),
		chartRow("checkpoint", ckpt, [5]float64{0.5, 0.5, 1, 2.5, 0.36}, 9.5, 38),
		{Name: "fp16", Variant: base, Pool: true, Error: "out of memory"},
		chartRow("accum4", acc, [5]float64{0.5, 0.5, 1, 1.3, 0.36}, 5.6, 31),
		chartRow("all", all, [5]float64{0.7, 0.5, 1, 0.35, 0.6}, 5.8, 33),
	}
	gor := CompareRow{Name: "gorgonia", Variant: base, PeakRSSBytes: 20 * rows[0].PeakReservedBytes, StepMSMedian: 100}
	return append(rows, gor)
}

// syntheticTimelines rise and fall over each step, 1 ms per event, the
// first half of each micro-batch forward, the second backward, then 1 ms of
// optimizer: baseline in 6 events, accum4 in 4 micro-batches of 6, and all
// exactly as accum4.
func syntheticTimelines() map[string]Timeline {
	mk := func(reps int, startMiB float64, deltasMiB []float64) Timeline {
		tl := Timeline{Step: 3}
		cur := int64(startMiB * (1 << 20))
		for range reps {
			t0 := float64(len(tl.Points))
			half := float64(len(deltasMiB)) / 2
			tl.Phases = append(tl.Phases, TimelineSpan{"forward", t0, t0 + half}, TimelineSpan{"backward", t0 + half, t0 + 2*half})
			for i, d := range deltasMiB {
				delta := int64(d * (1 << 20))
				cur += delta
				phase := "forward"
				if float64(i) >= half {
					phase = "backward"
				}
				tl.Points = append(tl.Points, TimelinePoint{TimeMS: float64(len(tl.Points)) + 0.5, Phase: phase, Category: "activations",
					DeltaBytes: delta, AllocatedBytes: cur, ReservedBytes: cur + 1<<20})
			}
		}
		end := float64(len(tl.Points))
		tl.Phases = append(tl.Phases, TimelineSpan{"optimizer", end, end + 1})
		return tl
	}
	return map[string]Timeline{
		"baseline": mk(1, 2, []float64{2, 2, 1.5, -1.5, -2, -2}),
		"accum4":   mk(4, 2, []float64{0.5, 0.5, 0.3, -0.3, -0.5, -0.5}),
		"all":      mk(4, 2, []float64{0.5, 0.5, 0.3, -0.3, -0.5, -0.5}),
	}
}

func syntheticSettings() CompareSetup {
	return CompareSetup{Config: "quickstart.yaml", Base: 8, Depth: 3, Params: 122492, H: 32, W: 32, MicroBatch: 8, Accumulate: 1, Steps: 3}
}

func TestChartNiceRange(t *testing.T) {
	for _, c := range []struct {
		max      float64
		ticks    int
		headroom float64
	}{{7.53, 8, 0.1}, {11.3, 8, 0.1}, {226, 8, 0.1}, {0.37, 8, 0.05}, {1, 8, 0}, {3.59, 8, 0.05}, {1234567, 6, 0.1}} {
		top, step := niceRange(c.max, c.ticks, c.headroom)
		if top < c.max*(1+c.headroom)-1e-9 {
			t.Errorf("niceRange(%v): top %v leaves no %v headroom", c.max, top, c.headroom)
		}
		n := top / step
		if math.Abs(n-math.Round(n)) > 1e-6 || n < float64(c.ticks)/2 || n > float64(c.ticks)+1 {
			t.Errorf("niceRange(%v): top %v step %v: %v intervals, want about %d", c.max, top, step, n, c.ticks)
		}
		m := step / math.Pow(10, math.Floor(math.Log10(step)))
		if !slicesContainsApprox([]float64{1, 2, 2.5, 5}, m) {
			t.Errorf("niceRange(%v): step %v is not 1, 2, 2.5 or 5 times a power of 10", c.max, step)
		}
	}
	if top, step := niceRange(0, 8, 0.1); top != 1 || step != 0.2 {
		t.Errorf("niceRange(0) = %v, %v; want 1, 0.2", top, step)
	}
	for _, c := range []struct {
		bytes float64
		unit  string
	}{{300 << 10, "KiB"}, {7.5 * (1 << 20), "MiB"}, {226 << 20, "MiB"}, {3 << 30, "MiB"}, {12 << 30, "GiB"}} {
		if u := unitFor(c.bytes); u.Name != c.unit {
			t.Errorf("unitFor(%v) = %s, want %s", c.bytes, u.Name, c.unit)
		}
	}
}

func slicesContainsApprox(xs []float64, v float64) bool {
	for _, x := range xs {
		if math.Abs(x-v) < 1e-9 {
			return true
		}
	}
	return false
}

func TestMemoryChartLayout(t *testing.T) {
	rows := syntheticRows()
	l, err := layoutMemory(rows)
	if err != nil {
		t.Fatal(err)
	}
	var poolNames, rssNames []string
	maxPool := 0.0
	for _, r := range l.Pool {
		poolNames = append(poolNames, r.Name)
		maxPool = math.Max(maxPool, poolPeak(r))
	}
	for _, r := range l.RSS {
		rssNames = append(rssNames, r.Name)
	}
	if got := strings.Join(poolNames, ","); got != "baseline,checkpoint,accum4,all" {
		t.Errorf("pool panel has %s, want the memunet variants that ran", got)
	}
	if got := strings.Join(rssNames, ","); got != "baseline,checkpoint,accum4,all,gorgonia" {
		t.Errorf("RSS panel has %s, want every row that ran", got)
	}
	if strings.Join(l.NoPool, ",") != "gorgonia" {
		t.Errorf("NoPool = %v, want [gorgonia]", l.NoPool)
	}
	gor := float64(rows[len(rows)-1].PeakRSSBytes)
	if maxPool != float64(rows[0].PeakReservedBytes) || gor < 19*maxPool {
		t.Fatalf("synthetic rows: largest pool bar %v, gorgonia RSS %v", maxPool, gor)
	}
	pa, ra := l.PoolAxis, l.RSSAxis
	if pa.Min != 0 || ra.Min != 0 {
		t.Errorf("y minimum: pool %v, RSS %v; want 0", pa.Min, ra.Min)
	}
	if pa.Unit.Name != "MiB" {
		t.Errorf("pool axis unit %s, want MiB", pa.Unit.Name)
	}
	// The largest pool bar fits, and the axis is the pool's, not gorgonia's
	// RSS: the bar spans most of the panel's height.
	top := pa.Max * pa.Unit.Bytes
	if top < maxPool {
		t.Errorf("pool axis tops at %v bytes: the %v-byte bar is clipped", top, maxPool)
	}
	if maxPool < 0.7*top {
		t.Errorf("largest pool bar %v bytes is only %.0f%% of the panel's %v", maxPool, 100*maxPool/top, top)
	}
	if ra.Max*ra.Unit.Bytes < gor {
		t.Errorf("RSS axis tops at %v bytes: gorgonia's %v is clipped", ra.Max*ra.Unit.Bytes, gor)
	}
	// Enough labelled ticks, each a number.
	var labelled []string
	for _, tk := range pa.Ticks(pa.Min, pa.Max) {
		if tk.Label != "" {
			labelled = append(labelled, tk.Label)
			if _, err := strconv.ParseFloat(tk.Label, 64); err != nil {
				t.Errorf("tick label %q is not a number", tk.Label)
			}
		}
	}
	if len(labelled) < 5 || len(labelled) > 12 {
		t.Errorf("pool axis labels %v: want 5 to 12", labelled)
	}

	// The panels drawn use these ranges, and every value is inside them.
	poolPanel, rssPanel, legend, err := memoryPlots(l, 400, 250)
	if err != nil {
		t.Fatal(err)
	}
	pool, rss := poolPanel.Plot, rssPanel.Plot
	if legendInData(pool) || legendInData(rss) {
		t.Error("a legend inside the panels' data")
	}
	if pool.Y.Min != 0 || pool.Y.Max != pa.Max || rss.Y.Min != 0 || rss.Y.Max != ra.Max {
		t.Errorf("panels' y ranges: pool [%v, %v], RSS [%v, %v]; want [0, %v], [0, %v]",
			pool.Y.Min, pool.Y.Max, rss.Y.Min, rss.Y.Max, pa.Max, ra.Max)
	}
	if !strings.Contains(pool.Y.Label.Text, "MiB") || !strings.Contains(rss.Y.Label.Text, "MiB") {
		t.Errorf("y labels %q, %q lack the unit", pool.Y.Label.Text, rss.Y.Label.Text)
	}
	if pool.X.Min > -0.5 || pool.X.Max < float64(len(l.Pool))-0.5 {
		t.Errorf("pool x range [%v, %v] cuts a variant off", pool.X.Min, pool.X.Max)
	}
	var labels []string
	for _, e := range legend {
		labels = append(labels, e.Label)
	}
	for _, want := range []string{"activations", "reserved", "RSS"} {
		if !strings.Contains(strings.Join(labels, "|"), want) {
			t.Errorf("legend %v lacks %q", labels, want)
		}
	}
}

func TestTimelineChartData(t *testing.T) {
	rows := syntheticRows()
	series, y := timelineData(rows, syntheticTimelines())
	if len(series) != 3 {
		t.Fatalf("%d series, want baseline, accum4 and all", len(series))
	}
	if y.Min != 0 {
		t.Errorf("y minimum %v, want 0", y.Min)
	}
	peak := map[string]float64{"baseline": 7.5 * (1 << 20), "accum4": 3.3 * (1 << 20), "all": 3.3 * (1 << 20)}
	events := map[string]int{"baseline": 6, "accum4": 24, "all": 24}
	for _, s := range series {
		if s.Events != events[s.Name] || len(s.Points) != s.Events+1 {
			t.Errorf("%s: %d events, %d points; want %d events and the state before them", s.Name, s.Events, len(s.Points), events[s.Name])
		}
		if math.Abs(float64(s.Peak)-peak[s.Name]) > 1 {
			t.Errorf("%s: peak %d, want %v", s.Name, s.Peak, peak[s.Name])
		}
		// The peak is the third event, the forward's last.
		if s.PeakPhase != "forward" || s.PeakMS != 2.5 {
			t.Errorf("%s: peak at %v ms in %q, want 2.5 ms in forward", s.Name, s.PeakMS, s.PeakPhase)
		}
		if y.Max*y.Unit.Bytes < 1.15*float64(s.Peak) {
			t.Errorf("y axis tops at %v bytes: no room above %s's peak %d for its label", y.Max*y.Unit.Bytes, s.Name, s.Peak)
		}
		// x: time in ms from 0 (before the first event) to the optimizer's end.
		first, last := s.Points[0], s.Points[len(s.Points)-1]
		if first.X != 0 || first.Y != 2*(1<<20) || s.EndMS != float64(s.Events)+1 {
			t.Errorf("%s: from %v to %v, end %v ms; want from (0, 2 MiB) to %d ms", s.Name, first, last, s.EndMS, s.Events+1)
		}
		for i := 1; i < len(s.Points); i++ {
			if s.Points[i].X < s.Points[i-1].X {
				t.Errorf("%s: time goes back at point %d", s.Name, i)
				break
			}
		}
		if x := s.timeAxis(); x.Min != 0 || x.Max != s.EndMS || len(labelled(x.Ticks(x.Min, x.Max))) < 4 {
			t.Errorf("%s: time axis %+v, want 0 to %v ms with 4 or more labels", s.Name, x, s.EndMS)
		}
	}
	if y.Max*y.Unit.Bytes > 1.6*peak["baseline"] {
		t.Errorf("y axis tops at %v bytes, far above the highest peak", y.Max*y.Unit.Bytes)
	}

	// A panel per variant, none drawn over another: three stacked; six in
	// two columns of three, row by row; the bands, line and peak in each;
	// the legend names the phases.
	for _, c := range []struct{ n, cols, rows int }{{1, 1, 1}, {3, 1, 3}, {4, 2, 2}, {6, 2, 3}, {7, 2, 4}} {
		if cols, rows := timelineGrid(c.n); cols != c.cols || rows != c.rows {
			t.Errorf("timelineGrid(%d) = %d x %d, want %d x %d", c.n, cols, rows, c.cols, c.rows)
		}
	}
	six := append(append([]timelineSeries{}, series...), series...)
	for i := range six {
		six[i].Name = strconv.Itoa(i)
	}
	columns, err := timelineColumns(six, y)
	if err != nil {
		t.Fatal(err)
	}
	if len(columns) != 2 || len(columns[0]) != 3 || len(columns[1]) != 3 {
		t.Fatalf("six panels in %d columns", len(columns))
	}
	if !strings.HasPrefix(columns[0][0].Title, "0 ") || !strings.HasPrefix(columns[1][0].Title, "1 ") || !strings.HasPrefix(columns[0][1].Title, "2 ") {
		t.Errorf("panels not row by row: %q, %q, %q", columns[0][0].Title, columns[1][0].Title, columns[0][1].Title)
	}
	for _, col := range columns {
		for i, p := range col {
			if p.Plot.Y.Max != y.Max || p.Plot.Y.Min != 0 {
				t.Errorf("%s: y [%v, %v], want the shared [0, %v]", p.Title, p.Plot.Y.Min, p.Plot.Y.Max, y.Max)
			}
			if got, want := p.Plot.X.Label.Text != "", i == len(col)-1; got != want {
				t.Errorf("%s: time axis named %v, want only under a column's last", p.Title, got)
			}
			if legendInData(p.Plot) {
				t.Errorf("%s: a legend inside the data", p.Title)
			}
		}
	}
	got := strings.Join(legendLabels(timelineLegend(series)), "|")
	if got != "forward|backward|optimizer|pool allocated bytes|the step's peak" {
		t.Errorf("legend %q", got)
	}
}

// legendInData reports whether p draws a legend of its own (over its data).
func legendInData(p *plot.Plot) bool {
	r := p.Legend.Rectangle(draw.Canvas{})
	return r.Size().X > 0 || r.Size().Y > 0
}

// labelled are the labels of the ticks that have one.
func labelled(ticks []plot.Tick) []string {
	var out []string
	for _, tk := range ticks {
		if tk.Label != "" {
			out = append(out, tk.Label)
		}
	}
	return out
}

// TestTimelineOf: a pool's events with phase marks become timeline.json's
// points (times from the first event, each with its phase) and spans, the
// last closed at the step's end mark.
func TestTimelineOf(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * 1e6) }
	events := []memory.Event{
		{At: ms(10), Phase: "forward", Allocated: 100},
		{At: ms(11), Category: memory.Activations, Delta: 512, Allocated: 612, Phase: "forward"},
		{At: ms(13), Phase: "backward", Allocated: 612},
		{At: ms(14), Category: memory.Activations, Delta: -512, Allocated: 100, Phase: "backward"},
		{At: ms(15), Phase: "optimizer", Allocated: 100},
		{At: ms(16), Allocated: 100},
	}
	tl := TimelineOf(7, events)
	want := Timeline{Step: 7, Points: []TimelinePoint{
		{TimeMS: 1, Phase: "forward", Category: "activations", DeltaBytes: 512, AllocatedBytes: 612},
		{TimeMS: 4, Phase: "backward", Category: "activations", DeltaBytes: -512, AllocatedBytes: 100},
	}, Phases: []TimelineSpan{{"forward", 0, 3}, {"backward", 3, 5}, {"optimizer", 5, 6}}}
	if !reflect.DeepEqual(tl, want) {
		t.Errorf("TimelineOf:\n got %+v\nwant %+v", tl, want)
	}
	if tl.endMS() != 6 {
		t.Errorf("end %v ms, want 6", tl.endMS())
	}
	// Without marks: points only; with no events: none, and not null.
	if tl := TimelineOf(1, events[1:2]); len(tl.Phases) != 0 || len(tl.Points) != 1 || tl.Points[0].TimeMS != 0 {
		t.Errorf("no marks: %+v", tl)
	}
	if raw, _ := json.Marshal(TimelineOf(1, nil)); string(raw) != `{"step":1,"points":[]}` {
		t.Errorf("no events: %s", raw)
	}
}

func TestChartHeadings(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth = 16, 4
	cfg.Data.Source, cfg.Data.Size = "synthetic", 48
	cfg.Train.BatchSize, cfg.Train.Accumulate = 4, 2
	s := NewCompareSetup("configs/x.yaml", cfg, 3, syntheticRows())
	for _, h := range []heading{memoryHeading(s, nil), timelineHeading(s, 3)} {
		text := h.Text()
		for _, want := range []string{"base 16", "depth 4", "122,492 params", "48×48 images", "micro-batch 4 × accumulation 2",
			"effective batch 8", "3 steps", "x.yaml"} {
			if !strings.Contains(text, want) {
				t.Errorf("heading %q lacks %q", text, want)
			}
		}
	}
	if got := groupDigits(1234567); got != "1,234,567" {
		t.Errorf("groupDigits(1234567) = %s", got)
	}
	if got := variantBrief(syntheticRows()[4].Variant); got != "2×4 fp16, ckpt all" {
		t.Errorf("variantBrief(all) = %q", got)
	}
	// A caption too wide for one line wraps between phrases, none lost.
	lines := wrapPhrases(sans(10), s.parts(), " · ", vg.Points(250))
	if len(lines) < 2 || strings.Join(lines, " · ") != s.String() {
		t.Errorf("wrapped caption %q, want several lines that join to %q", lines, s.String())
	}
}

// readChart decodes a chart and checks its size.
func readChart(t *testing.T, path string, wPx, hPx int) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != wPx || b.Dy() != hPx {
		t.Errorf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), wPx, hPx)
	}
	return img
}

// countColor counts the pixels of img that are c.
func countColor(img image.Image, c color.Color) int {
	r0, g0, b0, _ := c.RGBA()
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 == r0>>8 && g>>8 == g0>>8 && b>>8 == b0>>8 {
				n++
			}
		}
	}
	return n
}

func TestChartFiles(t *testing.T) {
	dir := t.TempDir()
	rows := syntheticRows()
	mem, tl := filepath.Join(dir, "memory.png"), filepath.Join(dir, "timeline.png")
	if err := MemoryChart(mem, rows, syntheticSettings()); err != nil {
		t.Fatal(err)
	}
	if err := TimelineChart(tl, rows, syntheticTimelines(), syntheticSettings()); err != nil {
		t.Fatal(err)
	}
	img := readChart(t, mem, memoryWidthPx, memoryHeightPx)
	// The pool bars are not dwarfed by gorgonia's RSS: the activations
	// (colour 3) of baseline alone are 5.5 of the axis's ~12.5 MiB, a
	// tall bar; on an axis up to gorgonia's 226 MiB they would be a sliver.
	act := countColor(img, seriesColor(3))
	if act < 3000 {
		t.Errorf("memory.png: %d pixels of the activations' colour; the pool bars are too small to read", act)
	}
	if n := countColor(img, rssFill); n < 3000 {
		t.Errorf("memory.png: %d pixels of RSS bars", n)
	}
	img = readChart(t, tl, timelineWidthPx, timelineHeightPx(3))
	for _, ph := range phaseOrder {
		if n := countColor(img, phaseColors[ph]); n < 500 {
			t.Errorf("timeline.png: %d pixels of the %s band", n, ph)
		}
	}

	// Only gorgonia ran: no pool panel, no lines, still both files.
	only := []CompareRow{rows[len(rows)-1]}
	if err := MemoryChart(mem, only, syntheticSettings()); err != nil {
		t.Fatal(err)
	}
	readChart(t, mem, memoryWidthPx, memoryHeightPx)
	if err := TimelineChart(tl, only, nil, syntheticSettings()); err != nil {
		t.Fatal(err)
	}
	readChart(t, tl, timelineWidthPx, timelineMinHeightPx)
	// Nothing ran: an error, not an empty chart.
	if err := MemoryChart(mem, rows[2:3], syntheticSettings()); err == nil {
		t.Error("memory chart of failed rows only: no error")
	}
}

// TestCompareDeviceColumns: rows from a GPU run (the device's own memory
// view) add "device used" and "context" to the table and compare.csv, and a
// device bar beside each RSS bar in memory.png; CPU rows add none of it.
func TestCompareDeviceColumns(t *testing.T) {
	rows := syntheticRows()
	var plain bytes.Buffer
	PrintCompareTable(&plain, rows)
	if strings.Contains(plain.String(), "device used") {
		t.Errorf("a CPU table has device columns:\n%s", plain.String())
	}
	for i := range rows {
		if rows[i].Pool && rows[i].Error == "" {
			rows[i].DeviceUsedPeakBytes = rows[i].PeakReservedBytes + 300<<20
			rows[i].ContextOverheadBytes = 300 << 20
		}
	}
	// The device's count (context included) sits on the RSS panel's axis:
	// the pool's axis is as without it.
	before, _ := layoutMemory(syntheticRows())
	after, _ := layoutMemory(rows)
	if after.PoolAxis != before.PoolAxis || after.RSSAxis.Max*after.RSSAxis.Unit.Bytes < float64(rows[0].DeviceUsedPeakBytes) {
		t.Errorf("with device bars: pool axis %+v (was %+v), RSS axis %+v", after.PoolAxis, before.PoolAxis, after.RSSAxis)
	}
	var table bytes.Buffer
	PrintCompareTable(&table, rows)
	lines := strings.Split(table.String(), "\n")
	if !strings.Contains(lines[0], "device used") || !strings.Contains(lines[0], "context") || !strings.Contains(table.String(), "300.00 MiB") {
		t.Errorf("GPU table:\n%s", table.String())
	}
	dir := t.TempDir()
	if err := WriteCompare(dir, rows, syntheticTimelines(), syntheticSettings()); err != nil {
		t.Fatal(err)
	}
	csvText, err := os.ReadFile(filepath.Join(dir, "compare.csv"))
	if err != nil {
		t.Fatal(err)
	}
	header := strings.SplitN(string(csvText), "\n", 2)[0]
	if !strings.Contains(header, "device used (bytes)") || !strings.Contains(header, "context (bytes)") || !strings.Contains(string(csvText), "314572800") {
		t.Errorf("compare.csv: %s", header)
	}
	if n := countColor(readChart(t, filepath.Join(dir, "memory.png"), memoryWidthPx, memoryHeightPx), deviceFill); n < 1000 {
		t.Errorf("memory.png: %d pixels of device bars", n)
	}
	var back []CompareRow
	raw, err := os.ReadFile(filepath.Join(dir, "compare.json"))
	if err == nil {
		err = json.Unmarshal(raw, &back)
	}
	if err != nil || len(back) != len(rows) || back[0].DeviceUsedPeakBytes != rows[0].DeviceUsedPeakBytes {
		t.Errorf("compare.json: %d rows, %v", len(back), err)
	}
}

// TestCompareTableFailedRow: a failed row fills every column (the rows
// below it stay aligned: found on the first GPU run, where a failed fp16
// row shifted every later one) and says why below the table.
func TestCompareTableFailedRow(t *testing.T) {
	var table bytes.Buffer
	if err := PrintCompareTable(&table, syntheticRows()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(table.String(), "\n"), "\n")
	rows := lines[:len(lines)-1]
	if len(rows) != 7 || lines[len(lines)-1] != "fp16 failed: out of memory" {
		t.Fatalf("want a header, 6 rows and the failure below:\n%s", table.String())
	}
	width := len(rows[0])
	for _, l := range rows {
		if len(l) != width {
			t.Errorf("row of %d characters, header %d:\n%s", len(l), width, table.String())
			break
		}
	}
	if !strings.Contains(rows[3], "failed") || strings.Contains(rows[3], "out of memory") {
		t.Errorf("the failed row: %q", rows[3])
	}
}

// TestCompareConvColumns: rows from a GPU run that name their
// convolution provider add "conv" and "conv ws" (the most workspace the
// library's chosen algorithms took) to the table and compare.csv, "-"
// where a row has none; CPU rows add neither.
func TestCompareConvColumns(t *testing.T) {
	rows := syntheticRows()
	var plain bytes.Buffer
	PrintCompareTable(&plain, rows)
	if strings.Contains(plain.String(), "conv ws") {
		t.Errorf("a CPU table has conv columns:\n%s", plain.String())
	}
	rows[0].Conv, rows[0].ConvWorkspaceBytes = "cudnn", 96<<20
	rows[1].Conv = "memunet"
	var table bytes.Buffer
	PrintCompareTable(&table, rows)
	lines := strings.Split(table.String(), "\n")
	if !strings.Contains(lines[0], "conv ws") || !strings.Contains(lines[1], "cudnn") || !strings.Contains(lines[1], "96.00 MiB") ||
		!strings.Contains(lines[2], "memunet") {
		t.Errorf("GPU table:\n%s", table.String())
	}
	var csvText bytes.Buffer
	if err := writeCompareCSV(&csvText, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(csvText.String(), "conv ws (bytes)") || !strings.Contains(csvText.String(), ",cudnn,100663296,") {
		t.Errorf("compare.csv:\n%s", csvText.String())
	}
}
