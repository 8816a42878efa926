package doctor

import (
	"fmt"
	"path"
	"strings"

	"github.com/sandboxd/sandboxd/nsinit/config"
)

// datascienceModules are what python-datascience declares, by the Debian
// package that provides each module below /usr/lib/python3/dist-packages.
var datascienceModules = []struct{ module, pkg string }{
	{"numpy", "python3-numpy"}, {"pandas", "python3-pandas"}, {"scipy", "python3-scipy"},
	{"sklearn", "python3-sklearn"}, {"matplotlib", "python3-matplotlib"}, {"seaborn", "python3-seaborn"},
	{"plotly", "python3-plotly"}, {"openpyxl", "python3-openpyxl"}, {"xlsxwriter", "python3-xlsxwriter"},
	{"docx", "python3-docx"}, {"reportlab", "python3-reportlab"}, {"pypdf", "python3-pypdf"},
	{"weasyprint", "weasyprint"}, {"PIL", "python3-pil"},
}

const (
	distPackages = "/usr/lib/python3/dist-packages"
	// cjkFont is the face matplotlibrc of python-datascience names first.
	cjkFont = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
)

// checkEnvironments lists each environment of the helper config and checks
// its tree is as registered (verify: envtree.CheckRegistered, reading the
// disk; nil skips it), then whether the data-science stack and the CJK
// fonts are installed.
func checkEnvironments(h Host, hc *config.Config, verify func(config.Environment) error) []Result {
	var out []Result
	if hc != nil {
		for _, e := range hc.Environments {
			r := Result{Name: "environment." + e.Name}
			what := fmt.Sprintf("%s (%s%s), digest %s", e.Name, e.Language, map[bool]string{true: ", default"}[e.Default], e.Digest)
			switch {
			case e.Root == "":
				r.Status, r.Detail = OK, what+": no tree"
			case verify == nil:
				r.Status, r.Detail = Skip, what+": tree not checked here"
			default:
				if err := rootOwned(h, e); err != nil {
					r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s: %v; the helper refuses its execs (503)", what, err), "as root: make install (re-registers the environments)"
				} else if err := verify(e); err != nil {
					r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s: %v; its execs are refused (503)", what, err), "as root: make install (rebuilds and re-registers the environments), after finding out who changed "+e.Root
				} else {
					r.Status, r.Detail = OK, what+": tree "+e.Root+" is as registered (re-hashed)"
				}
			}
			out = append(out, r)
		}
	}
	return append(out, checkDatascience(h), checkCJKFonts(h))
}

func rootOwned(h Host, e config.Environment) error {
	for _, p := range []string{e.Root, e.Manifest} {
		if err := h.CheckRootOwned(p); err != nil {
			return err
		}
	}
	return nil
}

func checkDatascience(h Host) Result {
	r := Result{Name: "environment.datascience-stack"}
	var missing []string
	for _, m := range datascienceModules {
		if _, err := h.Stat(path.Join(distPackages, m.module)); err != nil {
			missing = append(missing, m.pkg)
		}
	}
	if len(missing) > 0 {
		r.Status = Warn
		r.Detail = fmt.Sprintf("the data-science stack of python-datascience is incomplete: %s not installed", strings.Join(missing, ", "))
		r.Fix = "as root: apt-get install --no-install-recommends " + strings.Join(missing, " ") + " && make install"
		return r
	}
	r.Status, r.Detail = OK, fmt.Sprintf("%d data-science packages installed in %s", len(datascienceModules), distPackages)
	return r
}

func checkCJKFonts(h Host) Result {
	r := Result{Name: "fonts.cjk"}
	if _, err := h.Stat(cjkFont); err != nil {
		r.Status = Warn
		r.Detail = cjkFont + " is missing: Chinese, Japanese and Korean text in charts renders as boxes"
		r.Fix = "as root: apt-get install fonts-noto-cjk && make install"
		return r
	}
	r.Status, r.Detail = OK, cjkFont
	return r
}
