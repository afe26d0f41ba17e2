package rundir

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/runfiles"
)

// Banner is the line a run starts with (Options.OnStart's place): memunet's
// version, the data and its size, the variant cfg trains, the device (and
// the data-parallel ranks of comm, if more than one) and the run's folder.
func Banner(version string, cfg config.Config, device string, comm dist.Comm, dir string) string {
	size := ""
	if s := cfg.SampleSize(); s != "" {
		size = " " + strings.TrimSuffix(s, " images")
	}
	if comm != nil && comm.Size() > 1 {
		device += fmt.Sprintf(", x %d ranks (%s, effective batch %d)", comm.Size(), comm.Name(), cfg.Variant().EffectiveBatch()*comm.Size())
	}
	return fmt.Sprintf("memunet %s: training on %s data%s, %s, on %s; writing to %s", version, cfg.Data.Source, size, cfg.Variant(), device, dir)
}

// Print writes the end of the run in dir for a reader: steps and times,
// the last validation's scores and per-class table, the memory at its
// peaks, the allocator's and the device's counts, the peak per phase and
// the run's files.
func (s *Summary) Print(w io.Writer, dir string) {
	fb := memory.FormatBytes
	fmt.Fprintf(w, "done: %s  final loss %.4f  val miou %.4f  dice %.4f  pixel acc %.4f\n",
		s.doneTimes(), s.FinalLoss, s.ValMIoU, s.ValDice, s.ValPixelAcc)
	report.PrintClassTable(w, s.PerClass)
	cat := s.PeakAllocatedByCategory
	fmt.Fprintf(w, "memory: peak allocated %s (params %s, grads %s, optimizer %s, activations %s, workspace %s), peak reserved %s, peak RSS %s\n",
		fb(s.PeakAllocatedBytes), fb(cat["params"]), fb(cat["grads"]), fb(cat["optimizer"]), fb(cat["activations"]), fb(cat["workspace"]),
		fb(s.PeakReservedBytes), fb(s.PeakRSSBytes))
	switch {
	case s.ArenaBytes > 0:
		fmt.Fprintf(w, "allocator: arena of %s, every buffer at its planned place; %d allocator call(s), %d allocation(s) outside the plan\n",
			fb(s.ArenaBytes), s.SegmentAllocs, s.ArenaMisses)
	case s.PageBytes > 0:
		fmt.Fprintf(w, "allocator: %s over %s pages; %d pages mapped, %d moved or given back, %d cache flushes\n",
			s.Allocator, fb(s.PageBytes), s.PagesMapped, s.PagesUnmapped, s.CacheFlushes)
	case s.Allocator != "":
		fmt.Fprintf(w, "allocator: %s; %d allocator calls, %d cache flushes\n", s.Allocator, s.SegmentAllocs, s.CacheFlushes)
	}
	if s.DeviceUsedPeakBytes > 0 {
		fmt.Fprintf(w, "device: %s: peak in use %s of %s (cuMemGetInfo, as nvidia-smi shows it; %s of it was the context, kernels and scratch before the pool)\n",
			s.Device, fb(s.DeviceUsedPeakBytes), fb(s.DeviceTotalBytes), fb(s.ContextOverheadBytes))
	}
	report.PrintPhaseTable(w, s.PeakByPhase)
	files := []string{filepath.Join(dir, runfiles.Config), filepath.Join(dir, runfiles.Metrics), filepath.Join(dir, runfiles.Summary)}
	if curves := filepath.Join(dir, runfiles.Curves); exists(curves) {
		files = append(files, curves)
	}
	fmt.Fprintf(w, "files: %s\n", strings.Join(append(files, s.LastCheckpoint), ", "))
}

// doneTimes is the "done:" line's steps and times, saying which part of a
// resumed run they cover.
func (s *Summary) doneTimes() string {
	if s.ResumedFrom == "" {
		return fmt.Sprintf("%d steps in %.1fs (median %.1f ms/step)", s.Steps, s.WallSeconds, s.StepMSMedian)
	}
	return fmt.Sprintf("%d steps, %d of them in this part (from step %d) in %.1fs, %.1fs in all parts (median %.1f ms/step in this part)",
		s.Steps, s.PartSteps, s.PartFromStep, s.PartWallSeconds, s.WallSeconds, s.StepMSMedian)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
