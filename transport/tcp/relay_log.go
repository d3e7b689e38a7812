package tcp

// The resend log's side of relaying: numbering a frame at a known
// place of the pair's stream, and what a relaying writer asks of the log.

// addAt adds enc as add does (bound), if it is to be frame number seq of
// stream: kept reports whether it did, same whether the log's next
// number and stream were those (if not, the caller numbers the frame
// again).
func (l *sendLog) addAt(seq, stream uint64, enc []byte) (kept, same bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next != seq || l.stream != stream {
		return false, false
	}
	return l.addLocked(stream, true, len(enc), nil, enc), true
}

// addRefAt is addAt for the frame whose encoding is head then payload,
// the payload held by reference: the caller gives it up (Send's
// ownership) until the peer acknowledges the frame.
func (l *sendLog) addRefAt(seq, stream uint64, head, payload []byte) (kept, same bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next != seq || l.stream != stream {
		return false, false
	}
	return l.addLocked(stream, true, len(head), payload, head), true
}

// hasRoom reports whether a frame of size bytes would fit the log now
// (add's bound): relayWrap asks before it encodes and tags a frame.
func (l *sendLog) hasRoom(size int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fits(size)
}

// probing reports whether the peer's stream is unknown (never met) and
// the log already holds a frame for it.
func (l *sendLog) probing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stream == 0 && l.held() > 0
}

// nextNumber returns the number the next frame added will take, and the
// log's stream.
func (l *sendLog) nextNumber() (seq, stream uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next, l.stream
}

// bind gives the log the peer's first stream id, keeping the frames
// numbered for it before it was known (relayed ones).
func (l *sendLog) bind(stream uint64) {
	l.mu.Lock()
	if l.stream == 0 {
		l.stream = stream
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.reset(stream)
}

// ackPoint returns the number of the oldest frame not acknowledged.
func (l *sendLog) ackPoint() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// sinceAck returns the log's stream, the number of its oldest frame and
// a copy of all its frames' encodings.
func (l *sendLog) sinceAck() (stream, from uint64, frames []byte) {
	l.mu.Lock()
	stream = l.stream
	l.mu.Unlock()
	from, frames = l.since(stream, 0)
	return stream, from, frames
}
