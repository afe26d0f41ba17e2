package data

import (
	"fmt"
	"math"
)

// Intensity normalizations of data.source nifti (data.nifti.normalize).
const (
	// NormalizeWindow maps [lo, hi] (data.nifti.window, or the volume's
	// min and max) to [0, 1], then (v-mean)/std by data.mean and data.std.
	NormalizeWindow = "window"
	// NormalizeZScore makes each volume's voxels zero-mean, unit-variance
	// by its own mean and std (after clipping to data.nifti.window where
	// given): nnU-Net's normalization of MRI, CT's with a window.
	NormalizeZScore = "zscore"
)

// Intensity is how one volume's voxel values x become the model's input.
// Every voxel is clipped to [Lo, Hi] and kept at 16 bits, q =
// round((x-Lo)/(Hi-Lo) * 65535), the package's way: v = q/65535 in [0, 1]
// and n = (v-Mean)/Std. For zscore, n is then mapped by Affine to (x' -
// VolMean)/VolStd, x' the voxel as q stands for it, VolMean and VolStd the
// clipped voxels' mean and standard deviation.
type Intensity struct {
	Lo, Hi          float64
	ZScore          bool
	VolMean, VolStd float64
}

// Affine is what a zscore volume's package-normalized value n becomes:
// a*n + b (a = 1, b = 0 for window). From x' = Lo + v(Hi-Lo) and v =
// Std*n + Mean.
func (in Intensity) Affine() (a, b float32) {
	if !in.ZScore {
		return 1, 0
	}
	s := max(in.VolStd, 1e-8) // a constant volume: all 0
	span := in.Hi - in.Lo
	return float32(Std * span / s), float32((in.Lo + Mean*span - in.VolMean) / s)
}

// MeanStd is the data.mean and data.std that normalize the volume's
// [0, 1] intensities v as its z-score does: (v-mean)/std = a*(v-Mean)/Std
// + b with Affine's a and b. For window it is the package's Mean and Std.
func (in Intensity) MeanStd() (mean, std float64) {
	a, b := in.Affine()
	std = Std / float64(a)
	return Mean - float64(b)*std, std
}

// String says how the volume is normalized, for reports.
func (in Intensity) String() string {
	if in.ZScore {
		return fmt.Sprintf("[%g, %g], z-score by mean %g, std %g", in.Lo, in.Hi, in.VolMean, in.VolStd)
	}
	return fmt.Sprintf("[%g, %g] to [0, 1]", in.Lo, in.Hi)
}

// intensityStats accumulates a volume's voxels for its Intensity: the
// min and max, and the sum and sum of squares of the voxels clipped to
// the window where one is given.
type intensityStats struct {
	window     []float64
	lo, hi     float64
	sum, sumSq float64
	n          int64
}

func newIntensityStats(window []float64) *intensityStats {
	return &intensityStats{window: window, lo: math.Inf(1), hi: math.Inf(-1)}
}

func (s *intensityStats) add(x float64) {
	s.lo, s.hi = min(s.lo, x), max(s.hi, x)
	if len(s.window) == 2 {
		x = min(max(x, s.window[0]), s.window[1])
	}
	s.sum += x
	s.sumSq += x * x
	s.n++
}

// intensity is the Intensity of the voxels added, normalized as nc says.
func (s *intensityStats) intensity(nc NIfTIConfig) Intensity {
	in := Intensity{Lo: s.lo, Hi: s.hi, ZScore: nc.Normalize == NormalizeZScore}
	if len(s.window) == 2 {
		in.Lo, in.Hi = s.window[0], s.window[1]
	}
	if s.n > 0 {
		in.VolMean = s.sum / float64(s.n)
		in.VolStd = math.Sqrt(max(s.sumSq/float64(s.n)-in.VolMean*in.VolMean, 0))
	}
	return in
}

// check refuses voxels the Intensity cannot normalize: NaN or infinite
// ones, or a range or statistics beyond float64's.
func (s *intensityStats) check(in Intensity) error {
	const finite = "an image volume must hold finite values: replace them (e.g. by the background's value) and save it again"
	switch {
	case math.IsNaN(s.lo) || math.IsNaN(s.hi):
		return fmt.Errorf("holds NaN voxels; %s", finite)
	case s.n > 0 && (math.IsInf(s.lo, 0) || math.IsInf(s.hi, 0)):
		return fmt.Errorf("holds infinite voxels; %s", finite)
	case math.IsInf(in.Hi-in.Lo, 0) || (in.ZScore && (math.IsNaN(in.VolMean) || math.IsInf(in.VolMean, 0) || math.IsNaN(in.VolStd) || math.IsInf(in.VolStd, 0))):
		return fmt.Errorf("has intensities from %g to %g, too large to normalize (their range or squares overflow float64); rescale the volume (e.g. by scl_slope) or set data.nifti.window to a narrower range", s.lo, s.hi)
	}
	return nil
}

// Intensity is how data.source nifti normalizes v's voxels under nc; the
// error (the caller names the file) refuses voxels it cannot normalize.
func (v *Volume) Intensity(nc NIfTIConfig) (Intensity, error) {
	st := newIntensityStats(nc.Window)
	for k := range v.Len() {
		st.add(v.At(k))
	}
	in := st.intensity(nc)
	return in, st.check(in)
}
