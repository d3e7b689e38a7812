package stack

import (
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/vsync"
	"github.com/cohort-mp/cohort/wire"
)

// Options shape a node's stack beyond its Config.
type Options struct {
	// Join makes the node a joiner: it asks Contacts, in order, to admit it
	// (NEW_NODE, membership paper §3.7) instead of being one of the
	// initial members.
	Join     bool
	Contacts []core.NodeID
	// QuietDetector runs the detector with the same periodic traffic but
	// verdicts postponed by QuietDelay (benchmarks that inject the failure
	// report themselves); a quiet gossip detector does not probe the peers
	// whose connection drops (fd.GossipConfig.IgnoreHints), so that a
	// crash is not followed by every neighbour of the victim dialling it.
	QuietDetector bool
	// WrapMember, if not nil, wraps the membership machine (instrumentation;
	// the wrapper must pass every call on).
	WrapMember func(*member.Member) core.Machine
	// Layers are machines stacked above the membership (and the multicast
	// layers, with Config.Multicast), lowest first.
	Layers []core.Machine
	// Below are machines stacked below the detector (and the directory),
	// lowest first.
	Below []core.Machine
	// Directory, if not nil, puts the directory (addresses, metadata,
	// the confirmation of a graceful leave) below the detector, and has a
	// member.LeaveRequest stop the detector as well as the membership:
	// package group's nodes.
	Directory *Directory
}

// Directory describes this node to the directory machine.
type Directory struct {
	// Addr is the address other nodes dial to reach this node.
	Addr string
	// Book holds the addresses known at the start (a joiner's contacts).
	Book map[core.NodeID]string
	// Name and Meta are this node's name and metadata (at most MaxNameLen
	// and MaxMetaLen bytes), at version MetaVersion (at least 1): a node
	// that restarts must start above its former self's versions (package
	// group uses the wall clock).
	Name        string
	Meta        []byte
	MetaVersion uint64
}

// Stack is a node's machines.
type Stack struct {
	// Machine is the whole stack, lowest layer first: [Below...], the
	// directory (with Options.Directory), the detector (absent with DetectorOff), the membership, with Multicast
	// the stability detector and vsync, then [Layers...].
	Machine *core.Stack
	// Member is the membership machine.
	Member *member.Member
	// Detector is the failure detector machine, nil with DetectorOff.
	Detector core.Machine
	// VSync is the multicast layer, nil without Config.Multicast.
	VSync *vsync.Layer
}

// New builds the machines of node cfg.ID in a group whose initial members
// are listed (cfg.ID among them; any order: the default view is sorted by
// id, §3.2). A joiner (opts.Join) passes nil members.
func New(cfg Config, members []core.NodeID, opts Options) (*Stack, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mcfg := cfg.MemberConfig()
	var (
		m   *member.Member
		err error
	)
	if opts.Join {
		contacts := slices.DeleteFunc(slices.Clone(opts.Contacts), func(id core.NodeID) bool { return id == cfg.ID })
		m, err = member.NewJoiner(mcfg, member.JoinOptions{Contacts: contacts})
		members = nil
	} else {
		members = slices.Clone(members)
		slices.Sort(members)
		m, err = member.New(mcfg, members)
	}
	if err != nil {
		return nil, err
	}
	det, err := cfg.newDetector(members, opts.QuietDetector)
	if err != nil {
		return nil, err
	}
	layers := slices.Clone(opts.Below)
	var mm core.Machine = m
	if opts.WrapMember != nil {
		mm = opts.WrapMember(m)
	}
	dm := det
	if d := opts.Directory; d != nil {
		var contacts []core.NodeID
		if opts.Join {
			contacts = slices.DeleteFunc(slices.Clone(opts.Contacts), func(id core.NodeID) bool { return id == cfg.ID })
		}
		dr := newDir(cfg.ID, d.Addr, contacts, d.Book, mcfg.MaxProbes)
		dr.metas[cfg.ID] = metaRec{ver: max(d.MetaVersion, 1), name: d.Name, meta: slices.Clone(d.Meta)}
		layers = append(layers, dr)
		dm = (&gate{}).wrap(det)
	}
	if dm != nil {
		layers = append(layers, dm)
	}
	layers = append(layers, mm)
	var vs *vsync.Layer
	if cfg.Multicast {
		stableView := members
		if opts.Join {
			stableView = []core.NodeID{cfg.ID} // until its first view
		}
		vcfg := vsync.DefaultConfig()
		vcfg.Window = cfg.MulticastWindow
		vcfg.MaxQueued = 2 * cfg.MulticastWindow
		vcfg.MaxPayload = cfg.MaxMessageSize
		if vs, err = vsync.New(vcfg); err != nil {
			return nil, err
		}
		sd := stable.New(stable.DefaultConfig(), stableView)
		if err := sd.Err(); err != nil {
			return nil, err
		}
		layers = append(layers, vsync.HideFailures(sd), vs)
	}
	layers = append(layers, opts.Layers...)
	return &Stack{Machine: core.NewStack(layers...), Member: m, Detector: det, VSync: vs}, nil
}

// NewCodec returns a codec with every message kind a node's stack sends
// (detectors, membership, stability, vsync, the directory), and those
// registered by extra.
func NewCodec(extra ...func(*wire.Codec) error) (*wire.Codec, error) {
	c := wire.NewCodec()
	regs := []func(*wire.Codec) error{fd.RegisterCodecs, member.RegisterCodecs, stable.RegisterCodecs, vsync.RegisterCodecs, RegisterCodecs}
	for _, reg := range append(regs, extra...) {
		if err := reg(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}
