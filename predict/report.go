package predict

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/tiles"
)

// Report is predict.json.
type Report struct {
	Checkpoint string        `json:"checkpoint"`
	Step       int           `json:"step"`
	Input      string        `json:"input"`
	Precision  backend.DType `json:"precision"`
	Images     int           `json:"images"`
	// Outputs lists each input with its mask (and overlay) file.
	Outputs []Output `json:"outputs"`
	// Skipped lists the input files left out, each with why: a name that
	// cannot name its outputs or be reported faithfully (a line break in
	// it, say). Images counts the others.
	Skipped []Skipped `json:"skipped,omitempty"`
	// Metrics are set for a dataset split (which has masks): computed as
	// training's validation computes them.
	Metrics *metrics.Validation `json:"metrics,omitempty"`
	// VolumeScores average the volumes' scores against their reference
	// masks (Options.References), over the volumes.
	VolumeScores *VolumeScores `json:"volume_scores,omitempty"`
	// TrainingValMIoU is the val_miou training recorded at the checkpoint's
	// step, when it validated there.
	TrainingValMIoU *float64 `json:"training_val_miou,omitempty"`
	// UnlikeTraining says why Metrics may differ from training's
	// validation at this step (flip averaging, another precision); empty
	// when they are computed alike.
	UnlikeTraining     string `json:"unlike_training,omitempty"`
	PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
	// PlannedPeakBytes is the largest batch's planned peak allocated
	// (PlanBatch, in a fresh pool).
	PlannedPeakBytes int64 `json:"planned_peak_bytes"`
	// PlannedRSSBytes is the process's planned peak resident memory, the
	// largest of every batch's or file's: the process as it stood, the
	// pool's peak where it is host memory, and the host buffers beside it
	// (Need); PeakRSSBytes is the measured one (VmHWM; 0 where the system
	// does not report it).
	PlannedRSSBytes int64 `json:"planned_rss_bytes,omitempty"`
	PeakRSSBytes    int64 `json:"peak_rss_bytes,omitempty"`
	// Legend is the color of each class in the masks and overlays, also
	// drawn in legend.png.
	Legend []LegendEntry `json:"legend"`
	// Options are the choices the prediction was made with; Batch,
	// Device and CapacityBytes (0: none) how it ran.
	Options       Options `json:"options"`
	Batch         int     `json:"batch"`
	Device        string  `json:"device"`
	CapacityBytes int64   `json:"capacity_bytes"`
	// MaskValues is the value each class has in the mask files written
	// (the training masks' own values, e.g. [0, 255]); absent when the
	// masks hold the class indices (palette PNGs).
	MaskValues []int `json:"mask_values,omitempty"`
	// Members are the checkpoints of an ensemble (--checkpoint A,B,...),
	// Checkpoint the first; absent for one checkpoint.
	Members []Member `json:"members,omitempty"`
}

// plan notes a batch's or a file's plan: its need, and the process's
// planned peak resident memory with it (0: not planned).
func (r *Report) plan(need Need, rss int64) {
	r.PlannedPeakBytes = max(r.PlannedPeakBytes, need.PeakAllocated)
	r.PlannedRSSBytes = max(r.PlannedRSSBytes, rss)
}

// MemoryNote is the memory as the summary line says it: the pool's peak
// allocated and the process's peak resident memory, each beside its plan.
func (r *Report) MemoryNote() string {
	s := fmt.Sprintf("peak allocated %s (planned %s)", memory.FormatBytes(r.PeakAllocatedBytes), memory.FormatBytes(r.PlannedPeakBytes))
	if r.PeakRSSBytes > 0 && r.PlannedRSSBytes > 0 {
		s += fmt.Sprintf(", peak RSS %s (planned %s)", memory.FormatBytes(r.PeakRSSBytes), memory.FormatBytes(r.PlannedRSSBytes))
	}
	return s
}

// rssText is a plan's resident memory as a note's tail ("": none).
func rssText(rss int64) string {
	if rss <= 0 {
		return ""
	}
	return ", the process " + memory.FormatBytes(rss)
}

// ModelNote is what predicted, as the summary says it: "CHECKPOINT (step
// N, fp32)", or an ensemble's "an ensemble of 3 checkpoints (A at step N,
// B at step M, ...; fp32)".
func (r *Report) ModelNote() string {
	if len(r.Members) < 2 {
		return fmt.Sprintf("%s (step %d, %s)", r.Checkpoint, r.Step, r.Precision)
	}
	var list []string
	for _, m := range r.Members {
		list = append(list, fmt.Sprintf("%s at step %d", m.Checkpoint, m.Step))
	}
	return fmt.Sprintf("an ensemble of %d checkpoints (%s; %s)", len(r.Members), strings.Join(list, ", "), r.Precision)
}

// Counted is what was predicted as the summary says it: "1 image",
// "40 images", "1 volume", "3 images and 2 volumes" (a NIfTI volume is
// counted as a volume, not as an image).
func (r *Report) Counted() string {
	vols := 0
	for _, o := range r.Outputs {
		if isVolume(o.Input) {
			vols++
		}
	}
	imgs := max(r.Images-vols, 0)
	switch {
	case vols == 0:
		return plural(imgs, "image")
	case imgs == 0:
		return plural(vols, "volume")
	}
	return plural(imgs, "image") + " and " + plural(vols, "volume")
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// SkippedNote is what the summary line adds for the skipped inputs ("":
// none).
func (r *Report) SkippedNote() string {
	if len(r.Skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("; skipped %d input file(s) whose names cannot name outputs (warned above, listed in predict.json)", len(r.Skipped))
}

// Skipped is an input predict left out, and why.
type Skipped struct {
	Input string `json:"input"`
	Why   string `json:"why"`
}

// LegendEntry is one class's color.
type LegendEntry struct {
	Class int `json:"class"`
	// Name is the class's data.class_names entry, where it has one.
	Name  string `json:"name,omitempty"`
	Color string `json:"color"` // #rrggbb
	// Value is the class's value in the mask files, where it is not the class.
	Value *int `json:"value,omitempty"`
}

// Output is one predicted image.
type Output struct {
	Input string `json:"input"`
	// Channels are the files of a case of several modalities (nnU-Net's
	// CASE_0000.nii.gz, CASE_0001.nii.gz, ...), channel by channel; Input
	// is the first.
	Channels []string `json:"channels,omitempty"`
	Mask     string   `json:"mask"`
	Overlay  string   `json:"overlay,omitempty"`
	// Probs are the probability files (Options.Probs): one PNG per class,
	// or one .npy array.
	Probs []string `json:"probs,omitempty"`
	// Tiling is how the image was cut into tiles; absent when it was
	// predicted whole.
	Tiling *Tiling `json:"tiling,omitempty"`
	// Volume is how a 3D UNet's windows covered a NIfTI volume, and Score
	// the volume's scores against its reference mask (Options.References).
	Volume *VolumeTiling `json:"volume_tiling,omitempty"`
	Score  *VolumeScore  `json:"score,omitempty"`
	// KeptLargest is the pixels (voxels) Options.KeepLargest turned into
	// the background.
	KeptLargest int64 `json:"keep_largest_removed,omitempty"`
}

// Options are predict's output choices.
type Options struct {
	// Overlay also writes each image with its mask blended over it.
	Overlay bool `json:"overlay"`
	// Probs also writes the class probabilities: "" (none), png or npy.
	Probs string `json:"probs,omitempty"`
	// TTA averages each image's probabilities with its mirror's.
	TTA bool `json:"tta"`
	// Resize is how image files are sized for the model: auto (as
	// training prepared its images: data.resize, else the file's size times
	// data.scale), train (training's size), none (the file's own size) or
	// HxW; sides are multiples of 2^model.depth. Masks are scaled back to
	// each file's size.
	Resize string `json:"resize"`
	// ClassIndices writes class indices even where the training masks held
	// other values.
	ClassIndices bool `json:"class_indices"`
	// Tile predicts image files by tiles: "" (whole where an image fits,
	// else the largest tile that does), none (whole only: an image that
	// does not fit is refused), auto (the largest tile that fits, for
	// every file) or a side such as "256"; Overlap and Blend are the
	// tiles' (package tiles).
	Tile    string  `json:"tile,omitempty"`
	Overlap float64 `json:"overlap"`
	Blend   string  `json:"blend"`
	// References, with a 3D UNet, scores each NIfTI volume against its
	// reference mask (Dice per class, Output.Score and
	// Report.VolumeScores): a mask volume, or a folder holding one per
	// volume named as the volume (or as it without nnU-Net's channel
	// suffix _0000).
	References string `json:"references,omitempty"`
	// KeepLargest keeps, of the classes it lists (e.g. "1,2", or all:
	// every class but the background), only each one's largest connected
	// component in every mask written, the rest becoming the background
	// (data.background): see components.go. "": none.
	KeepLargest string `json:"keep_largest,omitempty"`
	// Force replaces an earlier prediction in the output folder.
	Force bool `json:"-"`
	// keep is KeepLargest parsed, a flag a class (nil: none); ensemble
	// says the predictor averages several models (Run sets both).
	keep     []bool
	ensemble bool
}

// probabilistic says the predictions come from host probabilities
// (Predictor.Probabilities) rather than the device's argmax: an
// ensemble's are the mean of its members'.
func (o Options) probabilistic() bool { return o.TTA || o.Probs != "" || o.ensemble }

// CheckFlags refuses, before anything is read, an option that none of
// its values names, as memunet predict's flags give them (Overlap -1 and
// Blend "": not given, the checkpoint's predict.* then): --probs,
// --overlap, --blend, and --keep-largest's words (its classes are held to
// the checkpoint's by Run).
func (o Options) CheckFlags() error {
	if o.Probs != "" && o.Probs != "png" && o.Probs != "npy" {
		return fmt.Errorf("predict: --probs %q: png or npy", o.Probs)
	}
	if o.Overlap != -1 {
		if err := tiles.ValidateOverlap("predict: --overlap", o.Overlap); err != nil {
			return err
		}
	}
	if o.Blend != "" {
		if err := tiles.ValidateBlend("predict: --blend", o.Blend); err != nil {
			return err
		}
	}
	if o.KeepLargest != "" && o.KeepLargest != KeepAll {
		if _, err := keepList(o.KeepLargest); err != nil {
			return fmt.Errorf("predict: %w", err)
		}
	}
	return nil
}

// WithDefaults fills the tiling options not given (Tile "", Overlap -1,
// Blend "") from a config's predict section.
func (o Options) WithDefaults(d config.Predict) Options {
	if o.Tile == "" && d.Tile > 0 {
		o.Tile = strconv.Itoa(d.Tile)
	}
	if o.Overlap < 0 {
		o.Overlap = d.Overlap
	}
	if o.Blend == "" {
		o.Blend = d.Blend
	}
	return o
}
