// Package data yields the images and masks that memunet trains on: the
// Dataset interface, the built-in synthetic shapes set, datasets read from
// files (the folder layout and PASCAL VOC), resizing, deterministic
// train/validation splits and per-epoch shuffles, parallel batch filling and
// a background Loader.
//
// # Sources
//
// Config is the config's data section itself (package config decodes it in
// place) and SourceConfig adds what the data needs of the model; its
// Validate (config.go) is the one check of data.*, and Open trusts it.
// Each data.source is a source (source.go) behind one interface: it lists
// and checks its samples and says how they split; Open (open.go) does the
// rest alike for all of them (the split's checks, the final size, patches,
// normalization) and Report (report.go) words what it found. The sources:
// synthetic (synthetic.go), folder and voc (scan.go: listing in files.go
// and voc.go, reading every file in full), nifti (nifti.go, niftiset.go).
// Decoding is decode.go (images), mask.go (masks), tiff.go and deep.go.
//
// # Files
//
// Open (config keys data.*) reads data.source folder (DIR/images/ and
// DIR/masks/, matched by file stem plus an optional mask suffix such as
// Carvana's _mask) or voc (JPEGImages/, SegmentationClass/,
// ImageSets/Segmentation/{train,val}.txt; an id that would read outside
// the root is refused). Images are PNG, JPEG, GIF or TIFF; masks are
// grayscale or palette PNG, GIF or TIFF whose raw values (gray levels or
// palette indices, read by value: 0..255 from 8-bit masks, 0..65535 from
// 16-bit gray ones) become classes by data.mask_values, by a scan of every
// mask (folder), or as they are (voc, where 255 is Ignore). Open decodes
// every file in full before training, so a truncated file, a mask of
// another size than its image, a value that is no class, an image without
// a mask, a symlink loop or broken link or an empty dataset is an error
// naming the file; Check lists every such problem, with the images' and
// masks' formats and bit depths. A TIFF is read by golang.org/x/image/tiff
// after tiff.go has read its header and refused what that decoder would
// misread (more than one page, separate planes, signed or float samples).
// 16-bit images keep their 16 bits (deep.go): v = p/65535. Files are
// decoded again each time a sample is read (nothing is cached); the
// Loader does that ahead of the trainer.
//
// data.source nifti (nifti.go: a NIfTI-1 reader and mask writer;
// niftistream.go: the same slice by slice; niftiset.go: the dataset)
// reads volumes as 2D slices across data.nifti.axis, windowed to [0, 1]
// and kept at 16 bits (intensity.go: or z-scored per volume), split by
// volume (by folder, fold or block of slices where data.split or
// data.folds say). nnU-Net's cases of several modalities (NAME_0000,
// NAME_0001, ...) are channels. Its decoded volumes are the one cache:
// least recently used out past 1 GiB, since a shuffled epoch visits every
// volume in turn. labels.go maps raw values to classes (data.labels,
// data.background); readlabels.go reads any mask file by value (eval of
// a folder of masks).
//
// # Volumes
//
// With model.dims 3 a sample is a volume (volume.go): D slices of h x w
// held stacked, so Size is (D*h, w) and every per-sample buffer, row,
// flip and metric of images holds for volumes; Volumes/DepthOf fold the
// rows back into slices for the model. The synthetic set makes cubes of
// solids (synthetic_volume.go), niftivolumes.go reads whole volumes or
// data.patch [D, H, W] patches with foreground oversampling, and
// write_volumes.go writes synthetic volumes as a nifti folder.
//
// # Bounds
//
// Every file is opened through package infile: a named pipe, a socket or a
// device (a link to /dev/zero) in the data folder is a problem naming it,
// never opened for reading; files are streamed to the decoders (a TIFF
// through io.ReaderAt: its header and directories, then its strips), never
// read whole. A header is read before any pixel or voxel: more than
// MaxImagePixels pixels, more file bytes than such an image could hold, or
// more than MaxDecodeBytes to decode (counted in bytes of the stored type
// and the copy made of it: a float64 volume costs 11 bytes a voxel, a
// progressive JPEG 19 a pixel) is refused first.
// Decoding holds only the decoder's own picture: Sample turns the image
// into floats a row at a time (8 or 16 bits) before its mask is decoded,
// and writes the mask's classes straight into the caller's buffer; Image
// converts a picture of 4 or more bytes a pixel in place (toRGBA, toDeep)
// and maps a mask's values to classes in place. Concurrent decodes of one dataset hold at most
// SourceConfig.DecodeBytes between them by the headers' estimates (a
// larger one runs alone). OpenContext and CheckContext stop a scan once
// their context is done (a signal); data.count is at most
// MaxSyntheticCount.
//
// # Layout
//
// An image is float32, planar (C, H, W): channel c, row y, column x is at
// index c*H*W + y*W + x. A batch of N images is (N, C, H, W), the images one
// after another. Image values are normalized per channel as (v-Mean)/Std with
// Mean 0.5 and Std 0.25, where v in [0, 1] is the raw intensity, so raw
// intensities map to [-2, 2]. Normalize (data.mean, data.std) sets other
// values per channel.
//
// A mask is uint8 (H, W), one class index per pixel, row-major (y*W + x);
// a batch of N masks is (N, H, W). Class 0 is background; Ignore (255) marks
// pixels the loss and metrics must skip. Every other value is below the
// dataset's Classes().
//
// # Who owns memory
//
// This package allocates no tensors for the trainer. Dataset.Sample and
// FillBatch write into slices the caller supplies (typically buffers taken
// from the memory pool, so their bytes are counted there) and keep no
// reference to them after returning. Sample checks the slice lengths exactly
// and returns an error, never panics, when they are wrong. A Loader stages
// its decoded-ahead batches in ordinary Go memory (a data loader's host
// buffers) and copies each into the caller's buffers.
//
// # Determinism
//
// Sample(i) depends only on the dataset and i, not on the order of calls or
// the goroutine making them; Split and Shuffle depend only on their
// arguments. The same config and seed give the same batches on every run and
// every machine; a Loader's micro-batch m (its flips and augmentation,
// augment.go and augment_nnunet.go, drawn per sample) depends only on m,
// so a run resumed at m sees what an uninterrupted one would.
//
// The package never knows the model: shapes here are plain ints and slices.
package data
