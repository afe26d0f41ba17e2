// Package tiles lays square tiles over an image larger than a model's
// input can be and blends the model's outputs on the tiles back into one
// (sliding-window inference, as MONAI's sliding_window_inference and
// nnU-Net's predictor do it).
//
// # Geometry
//
// Tiles of side T step by S = round(T*(1-overlap)) (at least 1). Along a
// side of L pixels, n = ceil((L-T)/S)+1 tiles (1 when L <= T) cover the
// padded length T+(n-1)*S >= L; the padding, split before and after the
// image (the larger half after), is filled by reflecting the image (the
// caller cuts tiles so; data.Window does), and the blended output is cut
// back to the image. A tile that covers the image exactly needs no
// padding and is the image.
//
// # Blending
//
// Every output pixel is the weighted mean of the tiles' outputs there, in
// float64: Σ w·out / Σ w, with w the tile's weight at that pixel: 1
// everywhere (constant) or a Gaussian centred on the tile, sigma T/8 per
// axis, at most 1 (nnU-Net's importance map). A pixel one tile covers gets
// that tile's output bit for bit (a float32 times w, divided by w in
// float64, rounds back to itself).
//
// # Memory
//
// A Blender keeps only a band of the padded image: the rows the tiles not
// yet added may still touch (T + (open-1)*S rows, open the tile rows a
// batch can span), K+1 float64 planes across the padded width. Rows leave
// the band, finished, as soon as every tile over them has been added.
// Nothing else is allocated after NewBlender; Emit's rows are the
// Blender's and valid only during the call.
package tiles
