// Package group is cohort's consistent membership for Go services: a set
// of processes that always agree on who is in the group. After a member
// crashes, every survivor installs the same numbered view without it
// (typically within a few hundred milliseconds on a LAN); after a member
// joins, every member installs the same view with it. Views are numbered
// (epochs), so "the same view" is checkable, and a program can act on a
// view knowing that every other survivor acts on the same one.
//
// Underneath, a failure detector (P2P-MPI's gossip with binary round-robin,
// or Phoenix heartbeats with k monitors) suspects crashed members, and the
// radix-tree membership protocol of Varma et al. (package member) agrees on
// the views. Optionally, view-synchronous reliable multicast (packages
// stable and vsync) delivers messages such that members that move from one
// view to the next delivered the same messages in the first.
//
// # Usage
//
// The caller's duties, in order:
//
//  1. Build a Config from a preset — [DefaultLANConfig] for a group on one
//     network, [DefaultLocalConfig] on one machine, [DefaultWANConfig] —
//     and set ID (unique in the group), Cluster (a name) and Secret (at
//     least 16 random bytes shared by every member). With BindAddr on every
//     interface, set AdvertiseAddr to the address others should dial.
//     Every member must use the same Cluster, Secret, Detector, Fanout and
//     timings.
//
//  2. The first member calls [Start]; every other member calls [Join] with
//     the addresses of one or more members (seeds). Join returns when the
//     node has installed its first view.
//
//  3. Read the views: [Group.View] gives the current one, [Group.Views] a
//     channel of every view installed, in order (each View says which
//     members joined, departed and left since the previous one, and
//     View.Prev names the previous epoch, so a reader can tell it has seen
//     them all).
//
//  4. Optionally watch [Group.Suspicions] (the local detector's opinions:
//     suspected, cleared, declared failed — unlike views they are not
//     agreed on), and with Config.Multicast send with [Group.Multicast]
//     and receive with [Group.Deliveries].
//
//  5. To go away, call [Group.Leave] (the others see a departure, reported
//     in View.Left, not a failure), then [Group.Close]. Close alone is a
//     crash as far as the others can tell.
//
// Steps 2 and 3 in code:
//
//	g, err := group.Start(cfg)                      // first member
//	g, err := group.Join(ctx, cfg, "10.0.0.1:7950") // the others
//
//	for v := range g.Views() {
//		log.Printf("view %v: %d members, root %v", v, len(v.Members), v.Root)
//	}
//
// # Guarantees
//
// Every node that installs the view numbered E installs the same members,
// and the epochs a node installs only grow. A crashed member is excluded
// after the detector declares it failed ([Config.DetectionBound] states the
// detector's worst case for a given group size) plus one view change (a
// round trip down and up the radix tree). A node that is excluded while
// alive (it was too slow, or cut off) learns it and asks to be admitted
// again under its id. Under a network partition each side reorganizes into
// its own view (the membership paper's behaviour) unless Config.Majority
// is set, in which case a side without a majority of the last view stops
// installing views.
//
// # Security
//
// Every connection proves knowledge of Secret (HMAC-SHA256
// challenge–response) before any frame is accepted; nodes of another
// Cluster are refused. With Config.TLS every connection is also encrypted
// and, with client certificates, mutually authenticated.
//
// # Beneath the API
//
// [NewStack] and [NewCodec] are the one place where cohort assembles a
// node's machines (detector, membership, optional multicast); package comm
// and cohort's commands use them to drive their own hosts. A service needs
// only Start and Join.
package group
