// Package metrics scores a segmentation: the confusion counts of predicted
// against true classes, and from them pixel accuracy, IoU and Dice, mean
// and per class, as training's validation, eval and predict report them.
//
// Invariants: a Confusion is Classes x Classes counts, rows the true class
// and columns the predicted one; pixels whose target is the ignore index
// are never counted. A class absent from both the targets and the
// predictions has no IoU or Dice (nil, null in JSON) and is left out of the
// means, never counted as 0 or 1.
//
// Memory: plain host values; a Confusion owns its Counts, which a backend's
// Confusion op adds to in place. Nothing here touches a device.
package metrics
