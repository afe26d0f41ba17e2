package model

// BatchNorms lists the network's BatchNorm2d layers in state_dict order
// (none unless Config.Norm is batch), for saving and restoring their
// NumBatchesTracked, which is not a Param. The state_dict key of a layer's
// count is its Weight's name with ".weight" replaced by ".num_batches_tracked".
func (m *UNet) BatchNorms() []*BatchNorm2d {
	var out []*BatchNorm2d
	m.eachBatchNorm(func(bn *BatchNorm2d) { out = append(out, bn) })
	return out
}
