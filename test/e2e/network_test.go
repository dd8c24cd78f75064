//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPodNetwork: the pod network and kube-proxy, seen from a pod's network
// namespace and from this host, and what keeps them on this machine. From a
// pod: the API server through the kubernetes Service (as the controller
// reaches it), another pod through its Service, and the pod itself through
// its own (hairpin). From the host: a pod through its Service, as the API
// server reaches an admission webhook's. And nothing leaves: what a pod
// sends off the machine is dropped before it is routed out, the host's
// packets to a service address nothing serves are refused, the only
// masquerade is kube-proxy's, for Service traffic, and the pod range is
// routed to the bridge alone.
//
// It runs curl in a pod's network namespace (nsenter, as root on the node):
// the images are FROM scratch, with no shell or client of their own.
func TestPodNetwork(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	apply(t, ns, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: one}\n"))
	pods := map[string]testPod{}
	for _, name := range []string{"client", "server"} {
		apply(t, ns, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Service
metadata: {name: %s}
spec:
  selector: {%q: %s}
  ports: [{port: 80, targetPort: 8080}]
`, name, podLabel, name)))
		pods[name] = testPod{name: name,
			volumes: []object{configMapVolume("config", "settings")},
			mounts:  map[string]string{"config": "/etc/config"},
		}.start(t, ns)
	}
	client, server := pods["client"], pods["server"]
	// inClient runs curl in the client pod's network namespace.
	inClient := func(args ...string) (string, error) {
		pid := mainProc(t, ns, client.name, "app").PID
		return run(append([]string{"nsenter", "-t", strconv.Itoa(pid), "-n", "curl", "-sS", "--max-time", "5"}, args...)...)
	}
	// reaches polls until curl in the client pod gets a body with want from
	// url: kube-proxy programs a new Service within a second or so.
	reaches := func(t *testing.T, url, want string, args ...string) {
		t.Helper()
		var (
			out string
			err error
		)
		waitFor(t, nudgeWait, func() bool {
			out, err = inClient(append(args, url)...)
			return err == nil && strings.Contains(out, want)
		}, func() string { return fmt.Sprintf("GET %s from a pod: %q, %v", url, out, err) })
	}
	kubernetesIP := strings.TrimSpace(mustKubectl(t, nil, "-n", "default", "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"))

	t.Run("pod to the API server through the kubernetes Service", func(t *testing.T) {
		reaches(t, "https://"+kubernetesIP+":443/readyz", "ok", "-k")
	})
	t.Run("pod to another pod through its Service", func(t *testing.T) {
		reaches(t, serviceURL(t, ns, "server", 80, "/config"), "/etc/config/mode")
	})
	t.Run("pod to itself through its own Service", func(t *testing.T) {
		reaches(t, serviceURL(t, ns, "client", 80, "/config"), "/etc/config/mode")
	})
	t.Run("host to a pod through its Service", func(t *testing.T) {
		waitLoaded(t, nudgeWait, serviceURL(t, ns, "server", 80, ""), "/etc/config/mode", "one")
	})

	bridge := routeDev(t, server.ip)
	t.Run("the sealing chains come first", func(t *testing.T) {
		for _, chain := range []string{"FORWARD", "INPUT", "OUTPUT"} {
			rules := strings.Split(mustRun(t, "iptables", "-t", "filter", "-S", chain), "\n")
			if len(rules) < 2 || rules[1] != "-A "+chain+" -j HRE2E-"+chain {
				t.Errorf("iptables %s does not start with a jump to HRE2E-%s:\n%s", chain, chain, strings.Join(rules, "\n"))
			}
		}
	})
	t.Run("a pod's packets off the machine are dropped", func(t *testing.T) {
		const outside = "203.0.113.1" // TEST-NET-3: routed by the default route, if any
		if _, err := run("ip", "route", "get", outside); err != nil {
			t.Logf("this machine has no route to %s: nothing could leave it anyway", outside)
		}
		drop := "-A HRE2E-FORWARD -i " + bridge + " ! -o " + bridge
		before := ruleCount(t, "filter", "HRE2E-FORWARD", drop)
		if out, err := inClient("--connect-timeout", "2", "http://"+outside+"/"); err == nil {
			t.Fatalf("a pod reached %s, off this machine: %q", outside, out)
		}
		if after := ruleCount(t, "filter", "HRE2E-FORWARD", drop); after <= before {
			t.Errorf("the drop rule for packets from %s to other interfaces counted %d packets before and %d after a pod's connect to %s", bridge, before, after, outside)
		}
	})
	t.Run("the host's packets to an unserved service address are refused", func(t *testing.T) {
		free := unusedServiceIP(t, kubernetesIP)
		refuse := "-A HRE2E-OUTPUT -d " + serviceRange(t) + " -j REJECT"
		before := ruleCount(t, "filter", "HRE2E-OUTPUT", refuse)
		if out, err := run("curl", "-sS", "--max-time", "5", "http://"+free+"/"); err == nil {
			t.Fatalf("GET http://%s/ (no Service there): %q; want the connection refused", free, out)
		}
		if after := ruleCount(t, "filter", "HRE2E-OUTPUT", refuse); after <= before {
			t.Errorf("%s counted %d packets before and %d after a connect to %s", refuse, before, after, free)
		}
	})
	t.Run("kube-proxy's is the only masquerade", func(t *testing.T) {
		for _, rule := range strings.Split(mustRun(t, "iptables", "-t", "nat", "-S"), "\n") {
			if strings.Contains(rule, "-j MASQUERADE") || strings.Contains(rule, "-j SNAT") {
				if !strings.HasPrefix(rule, "-A KUBE-POSTROUTING ") {
					t.Errorf("a masquerade outside kube-proxy's KUBE-POSTROUTING: %s", rule)
				}
			}
		}
		// KUBE-POSTROUTING masquerades only packets that KUBE-MARK-MASQ
		// marked, all of them Service traffic.
		post := mustRun(t, "iptables", "-t", "nat", "-S", "KUBE-POSTROUTING")
		if !regexp.MustCompile(`-A KUBE-POSTROUTING -m mark ! --mark (0x[0-9a-f]+)/(0x[0-9a-f]+) -j RETURN`).MatchString(post) {
			t.Errorf("KUBE-POSTROUTING does not return unmarked packets first:\n%s", post)
		}
	})
	t.Run("the pod range goes to the bridge only", func(t *testing.T) {
		for _, line := range strings.Split(strings.TrimSpace(mustRun(t, "ip", "-4", "route", "show", "table", "all", "to", "match", server.ip)), "\n") {
			if !strings.HasPrefix(line, "default ") && !strings.Contains(line, " dev "+bridge+" ") {
				t.Errorf("a route to the pod range not through %s: %s", bridge, line)
			}
		}
	})
}

// run runs a command and returns its standard output; the error carries its
// standard error.
func run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// routeDev is the link this host routes ip through.
func routeDev(t *testing.T, ip string) string {
	t.Helper()
	m := regexp.MustCompile(` dev (\S+)`).FindStringSubmatch(mustRun(t, "ip", "-o", "route", "get", ip))
	if m == nil {
		t.Fatalf("no route to %s", ip)
	}
	return m[1]
}

var counterRE = regexp.MustCompile(` -c (\d+) \d+`)

// ruleCount is the packet counter of the first rule of table's chain that
// starts with (after its counters are taken out) prefix, or contains it.
func ruleCount(t *testing.T, table, chain, match string) int {
	t.Helper()
	for _, rule := range strings.Split(mustRun(t, "iptables", "-t", table, "-v", "-S", chain), "\n") {
		m := counterRE.FindStringSubmatch(rule)
		if m == nil || !strings.Contains(counterRE.ReplaceAllString(rule, ""), match) {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	t.Fatalf("no rule %q in %s %s", match, table, chain)
	return 0
}

// serviceRange is the range of the cluster's Service addresses, as the API
// server was told it (--service-cluster-ip-range).
func serviceRange(t *testing.T) string {
	t.Helper()
	out := mustKubectl(t, nil, "get", "servicecidrs", "kubernetes", "-o", "jsonpath={.spec.cidrs[0]}")
	if out == "" {
		t.Fatal("no ServiceCIDR named kubernetes")
	}
	return out
}

// unusedServiceIP is an address of the service range (the one the
// kubernetes Service's address is in) that no Service has.
func unusedServiceIP(t *testing.T, kubernetesIP string) string {
	t.Helper()
	used := mustKubectl(t, nil, "get", "services", "-A", "-o", "jsonpath={.items[*].spec.clusterIP}")
	parts := strings.Split(kubernetesIP, ".")
	for last := 254; last > 1; last-- {
		ip := fmt.Sprintf("%s.%s.%s.%d", parts[0], parts[1], parts[2], last)
		if !strings.Contains(" "+used+" ", " "+ip+" ") {
			return ip
		}
	}
	t.Fatal("no free address in the service range")
	return ""
}
