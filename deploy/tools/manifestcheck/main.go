// Command manifestcheck checks what a JSON schema cannot: that the
// Kubernetes manifests in deploy/kubernetes keep the security settings
// SECURITY.md describes, and that the seccomp profile the DaemonSet
// installs is the one the Deployment names.
//
//	go run ./manifestcheck ../kubernetes
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: manifestcheck DIR")
		os.Exit(2)
	}
	objs, err := load(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifestcheck:", err)
		os.Exit(1)
	}
	if bad := check(objs); len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(os.Stderr, "manifestcheck:", b)
		}
		os.Exit(1)
	}
	fmt.Printf("manifestcheck: %d objects in %s keep the documented security settings\n", len(objs), os.Args[1])
}

type obj = map[string]any

func load(dir string) (map[string]obj, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := map[string]obj{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, doc := range bytes.Split(raw, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var o obj
			if err := yaml.UnmarshalStrict(doc, &o); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if o == nil {
				continue
			}
			key := fmt.Sprintf("%v/%v", o["kind"], get(o, "metadata", "name"))
			out[key] = o
		}
	}
	return out, nil
}

// get walks maps and, for a numeric-looking key on a list, its elements.
func get(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

func check(objs map[string]obj) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	want := func(what string, got, exp any) {
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			fail("%s is %v, want %v", what, got, exp)
		}
	}

	dep, ok := objs["Deployment/sandboxd"]
	if !ok {
		return []string{"no Deployment sandboxd"}
	}
	pod := get(dep, "spec", "template", "spec")
	want("Deployment pod hostUsers", get(pod, "hostUsers"), false)
	want("Deployment pod automountServiceAccountToken", get(pod, "automountServiceAccountToken"), false)
	want("Deployment pod runAsNonRoot", get(pod, "securityContext", "runAsNonRoot"), true)
	var sup any
	for _, c := range get(pod, "containers").([]any) {
		if get(c, "name") == "sandboxd" {
			sup = c
		}
	}
	if sup == nil {
		return append(bad, "no container sandboxd in the Deployment")
	}
	sc := get(sup, "securityContext")
	want("sandboxd allowPrivilegeEscalation (file capabilities need no_new_privs off)", get(sc, "allowPrivilegeEscalation"), true)
	want("sandboxd privileged", get(sc, "privileged"), false)
	want("sandboxd readOnlyRootFilesystem", get(sc, "readOnlyRootFilesystem"), true)
	want("sandboxd runAsNonRoot", get(sc, "runAsNonRoot"), true)
	if u, _ := get(sc, "runAsUser").(float64); u < 1 {
		fail("sandboxd runAsUser %v: want the non-root service user", get(sc, "runAsUser"))
	}
	want("sandboxd capabilities.drop", strs(get(sc, "capabilities", "drop")), []string{"ALL"})
	add := strs(get(sc, "capabilities", "add"))
	slices.Sort(add)
	want("sandboxd capabilities.add (the helper's file capabilities)", add, []string{"NET_ADMIN", "SETGID", "SETUID", "SYS_ADMIN"})
	bad = append(bad, checkGroups(pod, sup)...)
	want("sandboxd seccompProfile.type", get(sc, "seccompProfile", "type"), "Localhost")
	profile, _ := get(sc, "seccompProfile", "localhostProfile").(string)
	want("sandboxd seccompProfile.localhostProfile", profile, "sandboxd/kubernetes-worker.json")
	if p := get(pod, "securityContext", "seccompProfile", "type"); p != nil && p != "Localhost" {
		fail("pod seccompProfile.type %v: never Unconfined", p)
	}
	want("sandboxd appArmorProfile.type", get(sc, "appArmorProfile", "type"), "Localhost")
	want("sandboxd appArmorProfile.localhostProfile (profiles/apparmor/sandboxd)", get(sc, "appArmorProfile", "localhostProfile"), "sandboxd")
	if pm := get(sc, "procMount"); pm != "Unmasked" {
		fail("sandboxd procMount %v: bubblewrap's /proc needs Unmasked", pm)
	}

	ds, ok := objs["DaemonSet/sandboxd-seccomp-installer"]
	if !ok {
		fail("no DaemonSet sandboxd-seccomp-installer")
	} else {
		dpod := get(ds, "spec", "template", "spec")
		hostDir := ""
		for _, v := range get(dpod, "volumes").([]any) {
			if p, ok := get(v, "hostPath", "path").(string); ok {
				hostDir = p
			}
		}
		if want := filepath.Join("/var/lib/kubelet/seccomp", filepath.Dir(profile)); hostDir != want {
			fail("DaemonSet writes to %q, but the Deployment's profile %q is read from %q", hostDir, profile, want)
		}
		loader := strings.Join(strs(get(dpod, "initContainers", 1, "command")), " ")
		if get(dpod, "initContainers", 1, "name") != "load-apparmor" || !strings.Contains(loader, "apparmor_parser --replace") ||
			!strings.Contains(loader, "/etc/sandboxd/apparmor/sandboxd") {
			fail("the DaemonSet's second init container must load /etc/sandboxd/apparmor/sandboxd with apparmor_parser: %q", loader)
		}
		script := strings.Join(strs(get(dpod, "initContainers", 0, "command")), " ")
		if !strings.Contains(script, "/etc/sandboxd/profiles/kubernetes-worker.json") || !strings.Contains(script, "/host/"+filepath.Base(profile)) {
			fail("the DaemonSet's installer does not copy kubernetes-worker.json to %s: %q", filepath.Base(profile), script)
		}
		if img, dimg := get(dpod, "initContainers", 0, "image"), get(sup, "image"); img != dimg {
			fail("installer image %v differs from the supervisor's %v: the profile must come from the same image", img, dimg)
		}
		for _, path := range [][]any{{"initContainers", 0}, {"containers", 0}} {
			c := get(dpod, path...)
			want(fmt.Sprintf("installer %v allowPrivilegeEscalation", get(c, "name")), get(c, "securityContext", "allowPrivilegeEscalation"), false)
			want(fmt.Sprintf("installer %v capabilities.drop", get(c, "name")), strs(get(c, "securityContext", "capabilities", "drop")), []string{"ALL"})
		}
	}

	for name, o := range objs {
		for _, u := range unconfined(o, name) {
			fail("%s: never unconfined (SECURITY.md, Deployment)", u)
		}
	}

	np, ok := objs["NetworkPolicy/sandboxd-deny-all"]
	if !ok {
		fail("no NetworkPolicy sandboxd-deny-all")
	} else {
		types := strs(get(np, "spec", "policyTypes"))
		slices.Sort(types)
		want("NetworkPolicy policyTypes", types, []string{"Egress", "Ingress"})
		if get(np, "spec", "ingress") != nil || get(np, "spec", "egress") != nil {
			fail("NetworkPolicy sandboxd-deny-all must have no ingress or egress rules")
		}
	}
	pdb, ok := objs["PodDisruptionBudget/sandboxd"]
	if !ok {
		fail("no PodDisruptionBudget sandboxd")
	} else {
		want("PodDisruptionBudget selector", get(pdb, "spec", "selector", "matchLabels", "app.kubernetes.io/name"), "sandboxd")
	}
	return bad
}

// helperGID is the image's sandboxd-helper group (deploy/compose/Dockerfile):
// the group that may run the helper.
const helperGID = 10000

// checkGroups: pod-level groups reach every container of the pod, the
// client containers included, so none of them may be the helper's group
// and no fsGroup at all (it also adds its gid to every
// container); the image's /etc/group is not merged (Strict), so each
// container has exactly the groups written here; the supervisor alone has
// the helper's group, as its container-level primary group, and the socket
// group is another one.
func checkGroups(pod, sup any) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	psc := get(pod, "securityContext")
	if g := get(psc, "fsGroup"); g != nil {
		fail("pod fsGroup %v: it puts every container of the pod in that group; use none", g)
	}
	if p := get(psc, "supplementalGroupsPolicy"); p != "Strict" {
		fail("pod supplementalGroupsPolicy %v: want Strict (no groups from the image's /etc/group)", p)
	}
	num := func(v any) int { f, _ := v.(float64); return int(f) }
	for _, g := range get(psc, "supplementalGroups").([]any) {
		if num(g) == helperGID {
			fail("pod supplementalGroups holds %d, the helper's group: every container of the pod could run the helper", helperGID)
		}
	}
	if g := num(get(psc, "runAsGroup")); g == helperGID {
		fail("pod runAsGroup is the helper's group %d: every container of the pod could run the helper", helperGID)
	}
	if g := num(get(sup, "securityContext", "runAsGroup")); g != helperGID {
		fail("sandboxd runAsGroup %d: want the helper's group %d, set on this container only", g, helperGID)
	}
	// The workspace root must be a directory of the service uid's below
	// the image's root-owned /var/lib/sandboxd: mounted by subPath from a
	// directory an init container made as that uid, never the emptyDir's
	// own root-owned 0777 root.
	for _, m := range get(sup, "volumeMounts").([]any) {
		if p := fmt.Sprint(get(m, "mountPath")); strings.HasPrefix(p, "/var/lib/sandboxd") {
			if want := strings.TrimPrefix(p, "/var/lib/sandboxd/"); get(m, "subPath") != want || p == "/var/lib/sandboxd" {
				fail("sandboxd mounts %s without subPath %q: the helper needs a service-owned workspace root below a root-owned /var/lib/sandboxd", p, want)
			}
		}
	}
	socketGroup := ""
	for _, e := range get(sup, "env").([]any) {
		if get(e, "name") == "SANDBOXD_SOCKET_GROUP" {
			socketGroup = fmt.Sprint(get(e, "value"))
		}
	}
	if socketGroup == "" || socketGroup == fmt.Sprint(helperGID) {
		fail("sandboxd SANDBOXD_SOCKET_GROUP %q: want the callers' group, never the helper's %d", socketGroup, helperGID)
	}
	return bad
}

// unconfined lists every place in v that turns seccomp or AppArmor off:
// a seccompProfile or appArmorProfile of type Unconfined, or the older
// annotations (seccomp.security.alpha.kubernetes.io/...,
// container.apparmor.security.beta.kubernetes.io/...) set to unconfined.
func unconfined(v any, path string) []string {
	var out []string
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			p := path + "." + k
			if (k == "seccompProfile" || k == "appArmorProfile") && strings.EqualFold(fmt.Sprint(get(c, "type")), "Unconfined") {
				out = append(out, p+".type Unconfined")
			}
			if s, ok := c.(string); ok && (strings.Contains(k, "seccomp") || strings.Contains(k, "apparmor")) &&
				strings.EqualFold(s, "unconfined") {
				out = append(out, p+": unconfined")
			}
			out = append(out, unconfined(c, p)...)
		}
	case []any:
		for i, c := range t {
			out = append(out, unconfined(c, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}
