package data

import "context"

// A source reads one kind of dataset (data.source) for Open: it lists and
// checks the samples, filling the report, and says how they split. Open
// does the rest the same for every source: the split's checks, the final
// size, patches and normalization.
type source interface {
	// open reads the set cfg names; a found without src and a nil error
	// means rep holds the fatal problems. full checks every sample where
	// listing alone would not (the synthetic set's classes).
	open(ctx context.Context, cfg SourceConfig, rep *Report, full bool) (found, error)
}

// found is what a source read.
type found struct {
	src ImageSource
	// split divides the n samples into train and validation; nil: Split
	// by data.val_fraction and data.seed.
	split func(n int) (train, val []int)
	// test are the test samples (a folder set's test/), never trained or
	// validated on.
	test []int
	// stamps are the files and folders read, to tell a changed set (OpenCached).
	stamps []stamp
	// files and contents identify the set in its Fingerprint.
	files, contents string
}

// sourceOf is the source data.source names, and whether there is one.
func sourceOf(name string) (source, bool) {
	switch name {
	case SourceSynthetic:
		return syntheticSource{}, true
	case SourceFolder:
		return fileSource{voc: false}, true
	case SourceVOC:
		return fileSource{voc: true}, true
	case SourceNIfTI:
		return niftiSource{}, true
	}
	return nil, false
}
