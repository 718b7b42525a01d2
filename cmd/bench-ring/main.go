// Command bench-ring measures every election algorithm of election/ring
// on rings of 2^3 … 2^16 nodes (2^12 for the quadratic ones) and prints,
// per algorithm and size, the worst and mean messages, bits and time beside
// the paper's message bound, then plots messages/(n log₂ n) against n, one
// line per algorithm, as a PNG.
//
//	go run ./cmd/bench-ring -png bench-ring.png
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/timed-project/timed/election/ring"
)

func main() {
	minExp := flag.Int("min", 3, "smallest ring is 2^min")
	maxExp := flag.Int("max", 16, "largest ring is 2^max")
	maxQuad := flag.Int("maxquad", 12, "largest ring for quadratic algorithms is 2^maxquad")
	budget := flag.Int("budget", 1<<12, "random runs per size: budget/n, at least 1, at most 16")
	seed := flag.Uint64("seed", 1, "seed of every random choice")
	png := flag.String("png", "bench-ring.png", "plot file (empty: no plot)")
	only := flag.String("only", "", "comma-separated algorithm names (default all)")
	workers := flag.Int("j", runtime.NumCPU(), "parallel workers")
	flag.Parse()

	type job struct {
		a ring.Algorithm
		n int
	}
	var jobs []job
	for _, a := range ring.All() {
		if *only != "" && !strings.Contains(","+*only+",", ","+a.Name+",") {
			continue
		}
		top := *maxExp
		if a.Quadratic {
			top = min(top, *maxQuad)
		}
		for e := *minExp; e <= top; e++ {
			jobs = append(jobs, job{a, 1 << e})
		}
	}
	// Largest first, so the long runs do not end up last on one worker.
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].n > jobs[j].n })

	stats := make([]ring.Stat, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, *workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				runs := min(16, max(1, *budget/j.n))
				stats[i], errs[i] = ring.Measure(j.a, j.n, runs, *seed)
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()

	failed := false
	for _, err := range errs {
		if err != nil {
			log.Print(err)
			failed = true
		}
	}
	sort.SliceStable(stats, func(i, j int) bool {
		if stats[i].Algorithm != stats[j].Algorithm {
			return order(stats[i].Algorithm) < order(stats[j].Algorithm)
		}
		return stats[i].N < stats[j].N
	})
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "algorithm\tn\truns\tworst msgs\tmean msgs\tbound\tworst/bound\tmean/(n log n)\tworst bits\tmean bits\tworst time\tmean time\ttime bound\tworst case\t")
	for _, s := range stats {
		if s.Runs == 0 {
			continue
		}
		tb := "-"
		if s.TimeBound > 0 {
			tb = fmt.Sprintf("%.0f", s.TimeBound)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%.0f\t%.1f\t%.0f\t%.3f\t%.3f\t%.0f\t%.0f\t%.1f\t%.1f\t%s\t%s\t\n",
			s.Algorithm, s.N, s.Runs, s.WorstMsgs, s.MeanMsgs, s.Bound, s.WorstMsgs/s.Bound,
			s.PerNLogN(s.MeanMsgs), s.WorstBits, s.MeanBits, s.WorstTime, s.MeanTime, tb, s.WorstCase)
	}
	w.Flush()
	fmt.Println("\nbits: the Msg encoding each message travels in (tsp.ExtRing payload); time: in maximal link delays (a synchronous round is 2).")
	fmt.Println("bound: the paper's message bound, checked on every run; time bound: checked where the algorithm states one (\"-\": none);")
	fmt.Println("see each algorithm's doc comment for what they count. Runs: random arrangements (async, seeded) + ascending + descending.")
	if *png != "" {
		if err := draw(stats, *png); err != nil {
			log.Fatal(err)
		}
		fmt.Println("plot:", *png)
	}
	if failed {
		os.Exit(1)
	}
}

func order(name string) int {
	for i, a := range ring.All() {
		if a.Name == name {
			return i
		}
	}
	return -1
}

func draw(stats []ring.Stat, file string) error {
	p := plot.New()
	p.Title.Text = "Ring election: mean messages / (n log₂ n), random arrangements"
	p.X.Label.Text = "n"
	p.Y.Label.Text = "messages / (n log₂ n)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	byAlgo := map[string]plotter.XYs{}
	var names []string
	for _, s := range stats {
		if s.Runs == 0 {
			continue
		}
		if _, ok := byAlgo[s.Algorithm]; !ok {
			names = append(names, s.Algorithm)
		}
		byAlgo[s.Algorithm] = append(byAlgo[s.Algorithm], plotter.XY{X: float64(s.N), Y: s.PerNLogN(s.MeanMsgs)})
	}
	for i, name := range names {
		l, pts, err := plotter.NewLinePoints(byAlgo[name])
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		if i >= 7 { // plotutil has seven colours: vary the dashes after that
			l.Dashes = plotutil.Dashes(i / 7)
		}
		l.Color, pts.Color = c, c
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
	}
	return p.Save(11*vg.Inch, 7*vg.Inch, file)
}
