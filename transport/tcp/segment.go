package tcp

// smallBufferSegment returns the largest TCP segment, in bytes, of a
// connection whose kernel buffers are b bytes (Config.SocketBuffer), or 0
// to leave the kernel's choice: an eighth of the buffer, and at least the
// 536 bytes every TCP peer takes. Linux doubles the buffer it is given
// and offers, while the receiver reads, a window of that scaled by the
// ratio of bytes to memory of the segments it receives (0.45 for a stream
// of 1 KB messages over loopback: a window of 29,357 bytes in a buffer of
// 65,536), so the window falls below such a segment only when that ratio
// falls under a sixteenth. From 256 KiB the kernel's choice stands: a
// segment cannot be bounded above 32,767 bytes, and windows that large
// are not the ones that fall below a segment.
func smallBufferSegment(b int) int {
	const minSegment, maxSegment = 536, 32767
	s := max(b/8, minSegment)
	if s > maxSegment {
		return 0
	}
	return s
}
