// Package predict segments images with a checkpoint's model: the
// architecture, preprocessing and weights come from the checkpoint (package
// run reads it), the model runs in eval mode on a device of its own, and
// the classes (argmax on the device) come back to the host. It also scores a
// dataset split the way training validates.
package predict
