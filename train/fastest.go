package train

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
)

// FastestFitName names Plan's row of the fastest setting that fits the
// capacity (see fastestFit), shown where no named variant is it.
const FastestFitName = "fastest-fit"

// fastestFit searches the settings that keep cfg's model, data and
// effective batch for the one with the lowest estimated time whose
// reserved peak fits capacity: the precision as configured or 16-bit (bf16,
// or fp16 where configured), the micro-batch halved while it is even (with
// accumulation making up the effective batch), and recompute of no level,
// of all, or of the fewest-FLOP levels that fit (model.checkpoint: auto,
// planned only where none does not fit and all does: otherwise it is one of
// those two). ok is false when nothing fits.
func fastestFit(cfg config.Config, capacity int64) (best PlanRow, ok bool, err error) {
	precisions := []backend.DType{cfg.Train.Precision}
	if cfg.Train.Precision == backend.Float32 {
		precisions = append(precisions, backend.BFloat16)
	}
	try := func(c config.Config) (PlanRow, bool, error) {
		row, err := planConfig(c)
		if err != nil {
			return row, false, err
		}
		fits := row.PeakReservedBytes <= capacity
		if fits && (!ok || row.RelativeTime < best.RelativeTime ||
			row.RelativeTime == best.RelativeTime && row.PeakReservedBytes < best.PeakReservedBytes) {
			best, ok = row, true
		}
		return row, fits, nil
	}
	for _, prec := range precisions {
		c := cfg
		c.Train.Precision = prec
		c.Train.BatchSize, c.Train.Accumulate = cfg.Variant().EffectiveBatch(), 1
		for {
			c.Model.Checkpoint = config.Checkpoint{}
			_, noneFits, err := try(c)
			if err != nil {
				return best, false, err
			}
			c.Model.Checkpoint = config.Checkpoint{All: true}
			_, allFits, err := try(c)
			if err != nil {
				return best, false, err
			}
			if !noneFits && allFits && cfg.Model.Depth > 0 {
				a := c
				a.Model.Checkpoint, a.Memory.Capacity = config.Checkpoint{Auto: true}, config.ByteSize(capacity)
				if _, _, err := try(a); err != nil {
					return best, false, err
				}
			}
			if c.Train.BatchSize%2 != 0 {
				break
			}
			c.Train.BatchSize, c.Train.Accumulate = c.Train.BatchSize/2, c.Train.Accumulate*2
		}
	}
	if ok {
		best.Name = FastestFitName
	}
	return best, ok, nil
}
