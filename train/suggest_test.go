package train

import (
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
)

// TestSuggestPatch: the suggestion is the largest multiple of 2^depth
// whose plan fits, its plan that of a run with that patch, the next size
// up over the capacity (or the host's memory, where that is given); no
// capacity and a capacity nothing fits are errors.
func TestSuggestPatch(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth = 4, 2
	cfg.Data.Size, cfg.Data.Count = 32, 16
	cfg.Train.BatchSize = 2
	at := func(side int) int64 {
		c := cfg
		c.Data.Patch = []int{side, side}
		row, err := PlanConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		return row.PeakReservedBytes
	}
	for _, side := range []int{8, 16, 28} {
		s, err := SuggestPatch(cfg, at(side), 0)
		if err != nil {
			t.Fatal(err)
		}
		if s.Size != side || s.Row.PeakReservedBytes != at(side) || s.Next != side+4 || s.NextBytes <= at(side) || s.NextBytes != at(side+4) {
			t.Errorf("capacity of a %d patch: suggested %d (%d bytes), next %d (%d bytes)", side, s.Size, s.Row.PeakReservedBytes, s.Next, s.NextBytes)
		}
	}
	if s, err := SuggestPatch(cfg, 1<<40, 0); err != nil || s.Size != 32 || s.Next != 0 {
		t.Errorf("any capacity: %d, next %d, %v", s.Size, s.Next, err)
	}
	// With host memory as the bound, the pool and the buffers beside it
	// must fit: the need of a 16 patch allows 16 and not 20.
	c := cfg
	c.Data.Patch = []int{16, 16}
	row, err := PlanConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	hostNeed, _ := HostNeed(row)
	if s, err := SuggestPatch(cfg, 1<<40, hostNeed); err != nil || s.Size != 16 || hostNeed <= row.PeakReservedBytes {
		t.Errorf("host %d (pool %d): %d, %v", hostNeed, row.PeakReservedBytes, s.Size, err)
	}
	if _, err := SuggestPatch(cfg, 1<<40, 1<<10); err == nil || !strings.Contains(err.Error(), "no patch fits 1.00 KiB") {
		t.Errorf("host 1 KiB: %v", err)
	}
	if _, err := SuggestPatch(cfg, 0, 0); err == nil || !strings.Contains(err.Error(), "needs a capacity") {
		t.Errorf("no capacity: %v", err)
	}
	if _, err := SuggestPatch(cfg, at(4)-1, 0); err == nil || !strings.Contains(err.Error(), "no patch fits") {
		t.Errorf("too small: %v", err)
	}
}

// TestSuggestPatchVolumes: for a 3D UNet on NIfTI volumes the suggestion
// is the largest cube, a multiple of 2^depth no larger than the volumes'
// smallest side, whose plan fits.
func TestSuggestPatchVolumes(t *testing.T) {
	dir := volumeFolder(t, 6, 24)
	cfg := config.Default()
	cfg.Model.Dims, cfg.Model.InChannels, cfg.Model.Classes, cfg.Model.Base, cfg.Model.Depth = 3, 1, 2, 4, 2
	cfg.Data.Source, cfg.Data.Path, cfg.Data.Patch = data.SourceNIfTI, dir, []int{8, 8, 8}
	cfg.Train.BatchSize = 2
	at := func(side int) int64 {
		c := cfg
		c.Data.Patch = []int{side, side, side}
		row, err := PlanConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		return row.PeakReservedBytes
	}
	s, err := SuggestPatch(cfg, at(16), 0)
	if err != nil || s.Size != 16 || s.Next != 20 || s.NextBytes != at(20) || s.Row.Config.Data.Patch[2] != 16 {
		t.Errorf("capacity of a 16^3 patch: %d (next %d, %d bytes), %v", s.Size, s.Next, s.NextBytes, err)
	}
	if s, err := SuggestPatch(cfg, 1<<40, 0); err != nil || s.Size != 24 || s.Next != 0 {
		t.Errorf("any capacity: %d, next %d, %v; want the volumes' side 24", s.Size, s.Next, err)
	}
}

// TestSuggestPatchRefused: a config that cannot take data.patch is refused
// naming --suggest patch and what to plan instead, not the data.patch the
// suggestion tried.
func TestSuggestPatchRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *config.Config)
		want string
	}{
		{"synthetic volumes", func(c *config.Config) { c.Model.Dims, c.Data.Size = 3, 16 }, "plan --suggest patch: synthetic volumes (data.source synthetic, model.dims 3) train whole, without data.patch; plan data.size instead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Model.Base, cfg.Model.Depth = 2, 2
			tc.edit(&cfg)
			for _, capacity := range []int64{1 << 10, 1 << 40} {
				if _, err := SuggestPatch(cfg, capacity, 0); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "data.patch: [") {
					t.Errorf("capacity %d: %v, want %q", capacity, err, tc.want)
				}
			}
		})
	}
}

// volumeFolder writes count synthetic side^3 volumes of 2 classes as a
// NIfTI folder (images/, masks/) and returns it.
func volumeFolder(t *testing.T, count, side int) string {
	t.Helper()
	syn, err := data.NewSyntheticExact(data.SyntheticConfig{Count: count, Size: side, Depth: side, Classes: 2, Seed: 3, Noise: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := data.WriteVolumeFolder(syn, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}
