package model

// The recompute policy: which blocks recompute (gradient checkpointing, the
// config's model.checkpoint), what every other layer keeps for backward and
// what backward rebuilds instead (rebuild.go). It names a DoubleConv's
// parts (conv1 .. relu2) and never their positions: a rebuild between two
// named parts runs again whatever the block holds between them
// (DoubleConv.span), so a new layer in the block needs no change here.

// SetRecompute makes the DoubleConv blocks at the given levels recompute
// (see Config.Recompute: the encoder block and, below the bottleneck, the
// decoder block of each) and no others, and sets what each layer keeps.
// Call it between steps, not inside one.
func (m *UNet) SetRecompute(levels []int) {
	on := map[int]bool{}
	for _, l := range levels {
		on[l] = true
	}
	m.Config.Recompute = append([]int(nil), levels...)
	for lv, L := range m.levels {
		L.setBlocks(on[lv])
	}
	// An encoder's relu2 keeps only a mask: no later layer keeps its
	// output (max pooling keeps positions, the concatenation a copy). The
	// blocks an upsampling reads are setDecoderInput's; outc keeps its
	// input.
	for lv, L := range m.levels[:len(m.levels)-1] {
		L.encBody.relu2.Mask = true
		m.setDecoderInput(lv, on)
	}
}

// setBlocks makes level L's blocks recompute or not. A recomputed bilinear
// decoder keeps its input's two parts (decoderInput) and conv1's output;
// with transposed upsampling it keeps its input.
func (L *level) setBlocks(recompute bool) {
	L.encBody.rebuildMiddle(!recompute)
	L.enc, L.dec, L.input = L.encBody, nil, nil
	if recompute {
		L.enc = &Recomputed{Block: L.encBody}
	}
	if L.decBody == nil { // the bottleneck
		return
	}
	L.decBody.rebuildMiddle(!recompute)
	_, bilinear := L.up.(*Upsample2)
	switch {
	case recompute && bilinear:
		L.input = &decoderInput{up: L.up, cat: &L.cat}
		L.dec = &Recomputed{Block: L.decBody, Source: L.input}
	case recompute:
		L.dec = &Recomputed{Block: L.decBody}
	default:
		L.dec = L.decBody
	}
}

// rebuildMiddle sets whether a DoubleConv with norms rebuilds its middle
// activation (relu1's output, conv2's input) in backward from norm1's kept
// input, relu1 keeping a mask, or keeps it: a recomputed block keeps it,
// as its recomputation runs just before its backward, and there the mask
// would only add.
func (b *DoubleConv) rebuildMiddle(on bool) {
	if b.norm1 == nil {
		return
	}
	b.relu1.Mask, b.conv2.Source = on, nil
	if on {
		b.conv2.Source = b.normOutput(b.norm1, b.conv2)
	}
}

// output is the block's output as backward rebuilds it from norm2, if the
// block has norms.
func (b *DoubleConv) output() (replay, bool) {
	if b.norm2 == nil {
		return replay{}, false
	}
	return b.normOutput(b.norm2, nil), true
}

// setDecoderInput sets what level lv's decoder upsampling and conv1 rebuild
// in backward rather than keep. The block below's relu2 keeps a mask where
// nothing keeps that block's output: bilinear upsampling keeps nothing, and
// a transposed convolution rebuilds its input from the block's norm2 where
// the block does not recompute. A plain bilinear decoder's conv1 rebuilds
// its concatenation from its two parts: each from the norm2 of the block
// it comes from, or, where that block recomputes (its norm keeps nothing
// until its recomputation, after this backward), kept itself. Not at full
// size: that decoder's backward comes first, and its conv1's backward,
// holding the concatenation and its gradient, is the step's peak, so
// rebuilding it would only cost the time (the largest).
func (m *UNet) setDecoderInput(lv int, on map[int]bool) {
	L := m.levels[lv]
	below := m.levels[lv+1].encBody // the bottleneck, or the decoder below
	if lv+1 < len(m.levels)-1 {
		below = m.levels[lv+1].decBody
	}
	belowOut, belowNorm := below.output()
	skipOut, skipNorm := L.encBody.output()
	conv1 := L.decBody.conv1
	conv1.Source, L.plainCat = nil, nil
	switch up := L.up.(type) {
	case *Upsample2:
		below.relu2.Mask = true
		if skipNorm && belowNorm && !on[lv] && lv > 0 {
			L.plainCat = &decoderCat{skip: skipOut, below: catPart{from: belowOut, keeps: on[lv+1]}, up: L.up, cat: &L.cat}
			conv1.Source = replay{from: L.plainCat, block: L.decBody, to: conv1}
		}
	case *Upsample3:
		below.relu2.Mask = true // the up-sampling keeps nothing
	case *UpConv:
		rebuilt := belowNorm && !on[lv+1]
		up.Source, below.relu2.Mask = nil, rebuilt
		if rebuilt {
			up.Source = belowOut
		}
	}
}
