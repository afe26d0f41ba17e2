// Package config reads memunet's YAML configuration: sections model, data,
// train, memory and output, every key with a default (Default), unknown keys
// and wrongly typed values rejected with the file, line and key named, and
// command-line overrides (--set section.key=value) applied before decoding.
// Load reads a file only if it is a regular one of at most MaxFileBytes (a
// FIFO, a device or a socket is refused by name, unread), or else, by
// name, one of the built-in configs (package configs). A type error shows
// an example of the key's right shape.
//
// Validate checks values across sections (for example that the image size is
// divisible by 2^model.depth) and names the key, the bad value and what is
// allowed. A Config is a plain value; nothing here keeps state.
package config
