package backend

import "fmt"

// LayerShape is one convolution of the seed UNet, as the per-layer
// benchmark (backend/cuda's BenchLayers) runs it.
type LayerShape struct {
	Name  string    // the first of the UNet's convolutions of this shape, e.g. "down2.conv1"
	Conv  ConvShape // DT is set per run
	Count int       // how many of the UNet's convolutions have this shape
	// NoInputGrad: the first convolution, fed by the data, computes no
	// input gradient.
	NoInputGrad bool
}

// SeedUNetConvolutions lists the distinct convolutions of the seed UNet
// (the compare configs: depth 4, bilinear upsampling, 3 input channels, 4
// classes) of width base on batch images of size x size, in forward
// order: each level's two 3x3 convolutions down, each decoder's two up
// (the first over the skip and the upsampled level below, concatenated),
// the 1x1 output convolution.
func SeedUNetConvolutions(base, size, batch int) []LayerShape {
	const depth, inChannels, classes = 4, 3, 4
	var out []LayerShape
	add := func(name string, c, oc, px, k int) {
		s := ConvShape{N: batch, C: c, H: px, W: px, OC: oc, K: k, Pad: k / 2}
		for i := range out {
			if out[i].Conv == s {
				out[i].Count++
				return
			}
		}
		out = append(out, LayerShape{Name: name, Conv: s, Count: 1, NoInputGrad: len(out) == 0})
	}
	for lv := 0; lv <= depth; lv++ {
		in, name := base<<max(lv-1, 0), fmt.Sprintf("down%d", lv)
		if lv == 0 {
			in, name = inChannels, "inc"
		}
		add(name+".conv1", in, base<<lv, size>>lv, 3)
		add(name+".conv2", base<<lv, base<<lv, size>>lv, 3)
	}
	for lv := depth - 1; lv >= 0; lv-- {
		name := fmt.Sprintf("up%d", depth-lv)
		add(name+".conv1", 3*base<<lv, base<<lv, size>>lv, 3)
		add(name+".conv2", base<<lv, base<<lv, size>>lv, 3)
	}
	add("outc", base, classes, size, 1)
	return out
}
