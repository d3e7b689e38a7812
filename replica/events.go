package replica

import "github.com/cohort-mp/cohort/core"

// Send is the request an application (the layer above) hands the layer to
// send Payload to logical rank Dst on communicator Comm with Tag. Every
// replica of a rank issues the same Sends in the same order (they run the
// same deterministic program); the layer numbers them per channel
// (Comm, own rank, Dst). The layer keeps Payload: do not modify it after.
//
// Control makes the channel a control channel (the first Send of the
// channel decides; give every Send of a channel the same Control): its
// messages go out as KindControlData, which a caller's transport may
// carry apart from data and ahead of it (comm's revocations and agreement
// steps). Channels are independent of each other, so nothing depends on
// the order between them. The layer keeps a control channel's sends as
// any other, but the application may hand it one while the backup table
// is full (see [Layer.BackupFull]): control channels carry few messages.
type Send struct {
	Comm    uint64
	Dst     int
	Tag     int64
	Payload []byte
	Control bool
}

// Decide is the request for the K-th decision of this logical rank (K = 1,
// 2, 3, … in program order): a value every replica of the rank must agree
// on (a wildcard receive's match, the outcome of a WaitAny, a random
// seed). Value is this replica's proposal; the master's proposal wins. The
// answer is a [Decided] event.
type Decide struct {
	K     uint64
	Value []byte
}

// Delivered is the Seq-th message of channel (Comm, Src → this rank),
// delivered to the application. Every replica of a rank delivers each
// channel's messages in Seq order 1, 2, 3, …, each once, with the same
// payloads. Payload must not be modified.
type Delivered struct {
	Comm    uint64
	Src     int
	Tag     int64
	Seq     uint64
	Payload []byte
	// Placed: the caller placed the payload itself ([Layer.ReserveNext]);
	// Payload is what it gave [Layer.CommitReserved].
	Placed bool
}

// DeliveredEmitter is implemented by an Env that takes [Delivered] events
// by value: the layer then hands it every Delivered with EmitDelivered
// instead of Emit, which would box the event in an interface (an
// allocation per message). Every other event still goes to Emit; the
// order of all the calls is the order of the events.
type DeliveredEmitter interface {
	EmitDelivered(Delivered)
}

// Decided answers [Decide]: the value of this rank's K-th decision, final
// (every replica of the rank acts on the same value). Decisions are
// announced in K order.
type Decided struct {
	K     uint64
	Value []byte
}

// RankFailed reports that every replica of logical rank Rank has left the
// view: the rank is gone (comm turns it into its ULFM error). It is
// emitted once per rank, by every process.
type RankFailed struct {
	Rank int
}

// ReplicaLost reports that replica Phys of logical rank Rank left the view
// while the rank still has a live replica: informational only, the
// application sees no difference.
type ReplicaLost struct {
	Phys core.NodeID
	Rank int
}

// Finish is the request of a process whose program has finished (comm's
// Finalize): the layer tells every live process ([Fin]) and answers
// [Finished] once every process of the job has finished or left the view.
// A replica behind its peers may still need the others: a rank whose every
// replica left would be failed for it, and its remaining receives and
// collectives would fail where its peers' succeeded. Waiting for Finished
// before leaving keeps every process in the view until all are done.
type Finish struct{}

// Finished answers [Finish]: every process of the job has finished or
// left the view.
type Finished struct{}

// BackupFull reports that the backup table reached Config.MaxBackup sends
// or Config.MaxBackupBytes bytes (Sends and Bytes is what it holds): the
// application should hand the layer no more sends until [BackupRoom]. It
// is emitted once each time the table fills.
type BackupFull struct {
	Sends, Bytes int
}

// BackupRoom reports that commits (or a failed rank) freed the backup
// table below both bounds after a [BackupFull]: the application may send
// again.
type BackupRoom struct {
	Sends, Bytes int
}
