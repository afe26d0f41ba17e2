package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/memunet/memunet/backend"
)

// EmptyCache is memory.empty_cache: when the pool gives its cached blocks
// back.
type EmptyCache string

const (
	EmptyNever EmptyCache = "never" // keep them (PyTorch's default)
	EmptyStep  EmptyCache = "step"  // after every optimizer step
	EmptyOOM   EmptyCache = "oom"   // on an out-of-memory error, then retry the step once
)

// Offload is memory.offload: what waits in host memory instead of the
// device's.
type Offload string

const (
	OffloadNone        Offload = "none"
	OffloadCheckpoints Offload = "checkpoints" // what checkpointed blocks keep for backward
)

// Variant is how a run trades memory for time: the settings plan, compare
// and memory.fit vary side by side, the same model and data otherwise.
// They live in three sections of the file (train.batch_size,
// train.accumulate, train.precision, model.checkpoint, memory.empty_cache);
// Config.Variant gathers them and Config.WithVariant sets them. Its JSON
// (in plan, compare and summary.json) is micro_batch, accumulate, precision
// and checkpoint.
type Variant struct {
	MicroBatch int           `json:"micro_batch"`
	Accumulate int           `json:"accumulate"`
	Precision  backend.DType `json:"precision"`
	Checkpoint Checkpoint    `json:"checkpoint"`
	// Offload: what the checkpointed blocks keep waits in host memory
	// (memory.offload: checkpoints).
	Offload    bool       `json:"offload,omitempty"`
	EmptyCache EmptyCache `json:"-"`
}

// Variant gathers the run's variant settings.
func (c Config) Variant() Variant {
	return Variant{
		MicroBatch: c.Train.BatchSize, Accumulate: c.Train.Accumulate, Precision: c.Train.Precision,
		Checkpoint: c.Model.Checkpoint, EmptyCache: c.Memory.EmptyCache, Offload: c.Memory.Offload == OffloadCheckpoints,
	}
}

// WithVariant is c with v's settings.
func (c Config) WithVariant(v Variant) Config {
	c.Train.BatchSize, c.Train.Accumulate, c.Train.Precision = v.MicroBatch, v.Accumulate, v.Precision
	c.Model.Checkpoint = v.Checkpoint.Clone()
	c.Memory.EmptyCache = v.EmptyCache
	c.Memory.Offload = OffloadNone
	if v.Offload {
		c.Memory.Offload = OffloadCheckpoints
	}
	c.Train.Betas = slices.Clone(c.Train.Betas)
	return c
}

// EffectiveBatch is the samples per optimizer step.
func (v Variant) EffectiveBatch() int { return v.MicroBatch * v.Accumulate }

// Changes lists the keys in which v differs from from, as "key: value"
// ("the configuration as it is" when none does).
func (v Variant) Changes(from Variant) string {
	var out []string
	for i, kv := range v.settings() {
		if kv != from.settings()[i] {
			out = append(out, kv[0]+": "+kv[1])
		}
	}
	if len(out) == 0 {
		return "the configuration as it is"
	}
	return strings.Join(out, ", ")
}

// Sets is v as --set overrides (section.key=value, in YAML syntax).
func (v Variant) Sets() []string {
	var out []string
	for _, kv := range v.settings() {
		val := kv[1]
		if kv[0] == "model.checkpoint" && len(v.Checkpoint.Levels) > 0 && !v.Checkpoint.All {
			parts := make([]string, len(v.Checkpoint.Levels))
			for i, l := range v.Checkpoint.Levels {
				parts[i] = strconv.Itoa(l)
			}
			val = "[" + strings.Join(parts, ",") + "]"
		}
		out = append(out, kv[0]+"="+val)
	}
	return out
}

// SetsFrom is the --set overrides (Sets) of the keys in which v differs
// from from: what turns a run of from into one of v.
func (v Variant) SetsFrom(from Variant) []string {
	var out []string
	was := from.Sets()
	for i, set := range v.Sets() {
		if set != was[i] {
			out = append(out, set)
		}
	}
	return out
}

// String is the one-line form of a train banner: batch, precision,
// checkpointing and the cache policy.
func (v Variant) String() string {
	s := fmt.Sprintf("batch %d x %d micro-batches, %s, checkpoint %s", v.MicroBatch, v.Accumulate, v.Precision, v.Checkpoint)
	if v.Offload {
		s += " (inputs in host memory)"
	}
	return s
}

// VariantKeys are the config keys of a Variant.
func VariantKeys() []string {
	var keys []string
	for _, kv := range (Variant{}).settings() {
		keys = append(keys, kv[0])
	}
	return keys
}

// settings is v as (key, value) pairs in the order the keys are shown.
func (v Variant) settings() [][2]string {
	return [][2]string{
		{"model.checkpoint", v.Checkpoint.String()},
		{"train.precision", v.Precision.String()},
		{"train.batch_size", strconv.Itoa(v.MicroBatch)},
		{"train.accumulate", strconv.Itoa(v.Accumulate)},
		{"memory.empty_cache", string(v.EmptyCache)},
		{"memory.offload", string(v.offload())},
	}
}

func (v Variant) offload() Offload {
	if v.Offload {
		return OffloadCheckpoints
	}
	return OffloadNone
}

// ColumnNames head the columns of Columns in plan's and compare's tables.
func ColumnNames() []string { return []string{"micro x acc", "precision", "checkpoint"} }

// Columns is v in a table row: micro-batch x accumulation, precision,
// checkpointing.
func (v Variant) Columns() []string {
	ck := v.Checkpoint.String()
	if v.Offload {
		ck += " (host)"
	}
	return []string{fmt.Sprintf("%d x %d", v.MicroBatch, v.Accumulate), v.Precision.String(), ck}
}

// Equal reports whether v and o are the same settings.
func (v Variant) Equal(o Variant) bool { return slices.Equal(v.settings(), o.settings()) }
