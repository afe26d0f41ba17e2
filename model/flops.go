package model

// FLOPs counts the multiply-adds of one forward pass of an h x w image as
// 2*C*OC*K*K*OH*OW per convolution (2*C*OC*4*H*W per transposed one), the
// usual convention; norms, pooling and the loss are not counted. recompute
// is the part of forward spent in checkpointed blocks, which a training
// step runs twice.
func (m *UNet) FLOPs(h, w int) (forward, recompute float64) {
	block := func(b *DoubleConv, h, w int) {
		var f float64
		for _, l := range b.layers {
			if c, ok := l.(*Conv2d); ok {
				f += 2 * float64(c.InC*c.OutC*c.K*c.K) * float64(h*w)
			}
		}
		forward += f
		if b.Checkpointed {
			recompute += f
		}
	}
	block(m.inc, h, w)
	for i, d := range m.downs {
		block(d.conv, h>>(i+1), w>>(i+1))
	}
	for i, u := range m.ups {
		lh, lw := h>>(m.Config.Depth-1-i), w>>(m.Config.Depth-1-i)
		if uc, ok := u.upsample.(*UpConv); ok {
			forward += 2 * float64(uc.InC*uc.OutC*4) * float64(lh/2*lw/2)
		}
		block(u.conv, lh, lw)
	}
	forward += 2 * float64(m.outc.InC*m.outc.OutC) * float64(h*w)
	return forward, recompute
}
