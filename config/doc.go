// Package config reads memunet's YAML configuration: sections model, data,
// train, memory and output, every key with a default (Default), unknown keys
// and wrongly typed values rejected with the file, line and key named, and
// command-line overrides (--set section.key=value) applied before decoding.
// Load reads a file only if it is a regular one of at most MaxFileBytes (a
// FIFO, a device or a socket is refused by name, unread), or else, by
// name, one of the built-in configs (package configs). A type error shows
// an example of the key's right shape.
//
// A section another package owns is that package's own type, decoded in
// place, not a copy: data.Config is the data section and model.Arch the
// model section's architecture keys. Parse validates a config once
// (Validate: each key checked in one place, the owner's Validate for its
// section, this package's for the rest) and names the key, the bad value and
// what is allowed; the constructors that take a config or a section
// derived from it (data.Open, model.New, optim.New, train.NewTrainer,
// rundir.Run) trust it. A Config is a plain value; nothing here keeps
// state.
package config
