// Package group is cohort's consistent membership for Go services: a set
// of processes that always agree on who is in the group. After a member
// crashes, every survivor installs the same numbered view without it
// (typically within a few hundred milliseconds on a LAN); after a member
// joins, every member installs the same view with it. Views are numbered
// (epochs), so "the same view" is checkable, and a program can act on a
// view knowing that every other member acts on the same one: who owns a
// key ([View.Owner]), who leads ([View.Leader]), what each member said
// about itself ([Member.Meta]).
//
// Underneath, a failure detector (P2P-MPI's gossip with binary round-robin,
// or Phoenix heartbeats with k monitors) suspects crashed members, and the
// radix-tree membership protocol of Varma et al. (package member) agrees on
// the views. Optionally, view-synchronous reliable multicast delivers
// messages such that members that move from one view to the next delivered
// the same messages in the first.
//
// # Starting a node
//
// Every node starts the same way: build a Config from a preset
// ([DefaultLANConfig] for one network, [DefaultLocalConfig] on one
// machine, [DefaultWANConfig]), set Cluster (a name), Secret (at least 16
// random bytes every member shares) and Seeds (the addresses of other
// nodes, members or starting with this one; one list for the whole group,
// each node's own address in it, will do), and call [New]:
//
//	cfg := group.DefaultLANConfig()
//	cfg.AdvertiseAddr = "10.0.0.4:7950"
//	cfg.Cluster = "orders"
//	cfg.Secret = secret
//	cfg.Seeds = group.SeedList{"10.0.0.1:7950", "10.0.0.2:7950", "10.0.0.3:7950"}
//	cfg.Meta = []byte("zone=eu-1")
//	g, err := group.New(ctx, cfg)
//	if err != nil {
//		return err
//	}
//	defer g.Close(context.Background())
//
// New returns once the node is a member. The node's name is its host
// name unless Config.Name says otherwise; its id is derived from the name,
// so a node restarted under its name rejoins as itself.
//
// # How a group forms
//
// New asks each seed whether it is a member. If one is, the node joins
// that group. If none is, the node with the lowest id among those that
// reached each other forms the group and the others join it: nodes started
// at the same moment, each with the others as seeds, form one group,
// whatever the order in which they start (the argument is in boot.go; a
// simulation of 10,000 seeded starts and a test over TCP check it). A
// joiner that nobody admits for a while probes again. A node with no
// seeds, or that reaches none, forms a group of its own; two groups formed
// so do not merge, so give every node seeds that reach the group.
//
// Seeds come from a list, from DNS or from cohort supernodes, read anew at
// each attempt to join. A Kubernetes headless service, for one:
//
//	cfg.Seeds = group.DNSSeeds{Host: "orders.default.svc.cluster.local", Port: 7950}
//	cfg.Seeds = group.SRVSeeds{Service: "gossip", Proto: "tcp", Name: "orders.default.svc.cluster.local"}
//
// # Reading the views
//
// [Group.View] is the current view; [Group.Views] is a channel of every
// view delivered, in order; a [Delegate] (Config.Delegate) is told of the
// same views, of suspicions and of multicast deliveries from one goroutine:
//
//	for v := range g.Views() {
//		log.Printf("view %v led by %v", v, v.Leader())
//		for _, m := range v.Joined {
//			log.Printf("%s joined at %s with %q", m.Name, m.Addr, m.Meta)
//		}
//	}
//
// Each View says which members joined, departed and left (a graceful
// leave) since the previous view this node delivered, and View.Prev names
// that view's epoch, so a reader can tell whether it missed one. Queues
// are bounded (Config.EventBuffer): see [Delegate] for a slow reader.
//
// # Metadata
//
// Every member has a small metadata blob (at most [MaxMetaSize] bytes),
// set at the start (Config.Meta) and changed at run time:
//
//	err := g.SetMeta(ctx, []byte("zone=eu-1,draining"))
//
// Metadata travels with the views: the root of each view publishes the
// metadata of all its members once, so every member that delivers epoch E
// sees the same metadata with it. A change takes a view change (a new
// epoch with the same members), and SetMeta returns when this node has
// delivered it.
//
// # Owners, leaders and fencing
//
// [View.Owner] maps a key to a member by rendezvous hashing over the
// members' names, and [View.Leader] is the view's first member. Both are
// functions of the view, so every member that delivers epoch E agrees on
// them; the epoch is their fencing token: send it with every write made
// as owner or leader, and have the store refuse a token lower than the
// highest it has seen.
//
//	v := g.View()
//	if o := v.Owner(key); o.ID == g.ID() {
//		store.Put(key, value, v.Epoch) // the store refuses older epochs
//	}
//
// What is agreed depends on the partition policy. By default
// (Config.Majority false), each side of a partition reorganizes into its
// own views: within a side, members agree on every epoch; across sides,
// two members may each own a key (or lead) at once, in different epochs,
// and fencing alone cannot order them, since both sides' epochs grow.
// With Config.Majority, only a side holding a strict majority of the last
// view installs new views: the views form one history, so at any time at
// most one epoch is current, a minority keeps its last view (and its
// owners) but installs nothing, and a store that fences on the epoch
// refuses the minority's writes once the majority's newer epoch reached
// it.
//
// # Leaving
//
// [Group.Leave] leaves gracefully; [Group.Close] then stops the node.
// Close alone is a crash as far as the others can tell. The leave is
// agreed like the views: the view change that excludes the leaver says
// that it left, so every member that delivers that view reports it in
// View.Left, not as a failure, even a member that the leaver's own
// announcement never reached. A leaver that crashes before any member
// heard it leave counts as failed, at every member alike.
//
// # Guarantees
//
// Every node that installs the view numbered E installs the same members,
// and the epochs a node installs only grow. A crashed member is excluded
// after the detector declares it failed ([Config.DetectionBound] states the
// detector's worst case for a given group size) plus one view change. A
// node that is excluded while alive (it was too slow, or cut off) learns it
// and asks to be admitted again under its id.
//
// # Security
//
// Every connection proves knowledge of Secret (HMAC-SHA256
// challenge–response) before any frame is accepted; nodes of another
// Cluster are refused. With Config.TLS every connection is also encrypted
// and, with client certificates, mutually authenticated.
package group
