//go:build !linux

package stage

const noFollow = 0
