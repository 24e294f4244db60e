#!/usr/bin/python3
# suite: sweep --slurm and --status on a single-node Slurm it starts (root, slurm-wlm, munge)
"""Tests of `scripts/sweep --slurm` and `--status` on a real single-node Slurm that this test
starts on the machine itself, and stops again.

usage: /usr/bin/python3 tests/test_slurm.py [--keep]
  --keep   keep the temporary directory (slurm.conf, daemon logs, results) and print its path

Needs root (slurmd runs jobs as their user; SlurmUser=root), Debian's slurm-wlm and munge
(`apt-get install slurm-wlm munge`: .ci/run and scripts/install-deps install them) and a built
harness ($HARNESS, else ./harness). Nothing of the machine's own configuration is used or
changed: in a temporary directory the test writes a munge key and starts munged on its own
socket, writes a slurm.conf (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none,
AuthInfo=socket=<that munge socket>, one node "localhost" with CPUs=2, free ports on 127.0.0.1,
state and spool directories in the temporary directory) and starts slurmctld and slurmd in the
foreground; sbatch, squeue and scancel reach it through $SLURM_CONF. Whatever happens (a failed
check, an exception, SIGINT/SIGTERM, the overall time limit), it cancels its jobs and stops the
three daemons it started, by pid. Every wait has a time limit; the whole test has one too.

Checks, one line each ("ok - ..." or "FAIL - ...: details"), then "N passed, M failed"; exit
status 1 if anything failed:
  dry run       --slurm --dry-run writes the batch scripts (array with %N throttle, one task per
                run, --cpus-per-task, --partition, --time, extra sbatch args) and submits nothing
  submit        --slurm submits, prints the job id; every array task runs one run into
                results/<experiment>/<run>.h5 + .log; the summary job writes the summary;
                train.threads follows --cpus-per-task; --status says all complete
  same summary  the same sweep run locally (same threads per run) gives the same summary.csv,
                every column but the wall time
  resubmit      --slurm again submits nothing; sbatch of the same batch script again: every
                task skips its complete run, no results file or log is rewritten
  failure       a grid value the harness rejects only at run time (token ids >= vocab_size):
                --status reports that run as failed, with the exit status and the harness's
                message; the summary row says failed; the same sweep run locally gives the same
                --status report; resubmitting reruns only the failed run
  running       --status reports a running array task (job id, step); a "node failure" (the
                task's processes SIGKILLed) is reported as stopped without finishing; a
                resubmission reruns it; scancel is reported as interrupted with Slurm's message
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
sys.path.insert(0, os.path.join(ROOT, "python"))
from heads.core import harness  # noqa: E402
from heads import results
from heads.sweep import runstate
from checks import check, end_suite, read_csv, run_check, statuses  # noqa: E402

PY = "/usr/bin/python3"
TOTAL_SECONDS = 240          # the whole test, daemons included
DAEMONS = ["munged", "slurmctld", "slurmd"]
CLIENTS = ["sbatch", "squeue", "scancel", "sinfo"]


class TimeLimit(Exception):
    pass


def write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def wait_for(condition, timeout, step=0.2):
    end = time.time() + timeout
    while time.time() < end:
        value = condition()
        if value:
            return value
        time.sleep(step)
    return condition()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------
# the cluster: munged, slurmctld, slurmd in a temporary directory


class Cluster:
    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "slurm")
        self.procs = {}   # name -> Popen, the daemons this test started
        self.jobs = set()  # job ids this test submitted (cancelled at the end)
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        self.env["SLURM_CONF"] = self.conf

    def start(self):
        d = self.dir
        # munged insists: the key readable by its owner only, the socket's directory (and every
        # one above it) searchable by all, no directory writable by others without the sticky bit.
        for sub, mode in (("", 0o755), ("munge", 0o755), ("munge/key", 0o700), ("state", 0o755),
                          ("spool", 0o755), ("log", 0o755)):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            os.chmod(os.path.join(d, sub), mode)
        key = os.path.join(d, "munge", "key", "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(os.urandom(1024))
        self.socket = os.path.join(d, "munge", "munge.socket")
        self.spawn("munged", ["munged", "--foreground", f"--socket={self.socket}",
                              f"--key-file={key}", f"--pid-file={d}/munge/munged.pid",
                              f"--log-file={d}/log/munged.log", f"--seed-file={d}/munge/seed"])
        if not wait_for(lambda: os.path.exists(self.socket) or self.procs["munged"].poll()
                        is not None, 15) or self.procs["munged"].poll() is not None:
            raise RuntimeError("munged did not start: " + self.tail("munged"))

        ncpu = max(1, min(2, runstate.available_cpus()))
        self.cpus = ncpu
        ctld_port, slurmd_port = free_port(), free_port()
        while slurmd_port == ctld_port:
            slurmd_port = free_port()
        write(self.conf, f"""\
# written by tests/test_slurm.py: a single-node Slurm on loopback, state in {d}
ClusterName=sweeptest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=10
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
NodeName=localhost NodeAddr=127.0.0.1 CPUs={ncpu} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")
        self.spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        self.spawn("slurmd", ["slurmd", "-D", "-N", "localhost", "-f", self.conf])

        def idle():
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited with status {p.returncode}: "
                                       + self.tail(name))
            r = self.client(["sinfo", "-h", "-o", "%T"], timeout=10)
            return r.returncode == 0 and r.stdout.strip() == "idle"
        if not wait_for(idle, 60, 0.5):
            raise RuntimeError("the node did not become idle within 60 s: "
                               + self.tail("slurmctld") + self.tail("slurmd"))

    def spawn(self, name, cmd):
        out = open(os.path.join(self.dir, "log", name + ".out"), "w")
        self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.env)
        out.close()

    def tail(self, name, n=15):
        text = ""
        for path in (os.path.join(self.dir, "log", name + ".out"),
                     os.path.join(self.dir, "log", name + ".log")):
            try:
                with open(path, errors="replace") as f:
                    text += "".join(f.readlines()[-n:])
            except OSError:
                pass
        return "\n" + text

    def client(self, cmd, timeout=30):
        return subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=timeout)

    def queue(self):
        """{job id: state} of every job of this cluster that is pending, running or completing."""
        r = self.client(["squeue", "-h", "-r", "-o", "%F|%i|%T"], timeout=15)
        if r.returncode != 0:
            raise RuntimeError("squeue failed: " + r.stderr)
        out = {}
        for line in r.stdout.split():
            array, job, state = line.split("|")
            out[job] = state
            out[array] = state
        return out

    def wait_done(self, jobs, timeout=90):
        """Wait until none of these jobs (array or plain job ids) is in the queue."""
        jobs = {str(j) for j in jobs if j}
        t0 = time.time()
        done = wait_for(lambda: not jobs & set(self.queue()), timeout, 0.5)
        print(f"# waited {time.time() - t0:.1f} s for job(s) {', '.join(sorted(jobs))}"
              + ("" if done else f": still queued after {timeout} s"), flush=True)
        return done

    def stop(self):
        """Cancel this test's jobs, then stop the daemons it started (by pid)."""
        if self.jobs and self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            try:
                self.client(["scancel"] + sorted(self.jobs), timeout=15)
                self.wait_done(self.jobs, 25)
            except Exception as e:  # noqa: BLE001 - stop the daemons anyway
                print(f"# while cancelling the jobs: {e}", flush=True)
        for name in reversed(list(self.procs)):  # slurmd, slurmctld, then munged
            p = self.procs[name]
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
        return [name for name, p in self.procs.items() if p.poll() is None]


# ------------------------------------------------------------------------------------------------
# helpers


def sweep(cluster, *args, timeout=120):
    return subprocess.run([PY, os.path.join(SCRIPTS, "sweep")] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout, env=cluster.env,
                          cwd=ROOT)


def submitted_job(p):
    m = re.search(r"submitted job array (\d+)", p.stdout)
    return m.group(1) if m else None


def summary_job(outdir, array_job):
    """The summary job id recorded next to the array's batch script."""
    for jobs in sorted(glob_dirs(outdir)):
        try:
            text = open(os.path.join(jobs, "jobs")).read()
        except OSError:
            continue
        if f"array {array_job}\n" in text:
            m = re.search(r"^summary (\d+)$", text, re.M)
            return m.group(1) if m else None
    return None


def glob_dirs(outdir):
    base = os.path.join(outdir, "slurm")
    return [os.path.join(base, d) for d in os.listdir(base)] if os.path.isdir(base) else []


def mtimes(outdir):
    """Modification times of the runs' results files and logs (not the summary's)."""
    return {n: os.stat(os.path.join(outdir, n)).st_mtime_ns for n in os.listdir(outdir)
            if (n.endswith(".h5") or n.endswith(".log")) and not n.startswith("summary.")}


def submit(cluster, exp, res, *extra):
    p = sweep(cluster, exp, "--slurm", "--results", res, *extra)
    job = submitted_job(p)
    if job:
        cluster.jobs.add(job)
        outdir = os.path.join(res, os.path.splitext(os.path.basename(exp))[0])
        s = summary_job(outdir, job)
        if s:
            cluster.jobs.add(s)
    return p, job


# ------------------------------------------------------------------------------------------------
# the tests


def make_inputs(tmp):
    tiny = write(os.path.join(tmp, "tiny.yaml"), """\
model: {vocab_size: 16, d_model: 16, n_head: 2, n_layer: 2, seq_len: 16}
train: {steps: 20, batch_size: 4, lr: 1.0e-2, warmup_steps: 2, seed: 0}
data: {task: induction, min_period: 2, max_period: 6}
output: {log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 2}
""")
    # token ids 0..15: a run with vocab_size 12 passes `harness --shapes` (which does not read
    # the data) and is rejected when it starts training: a failure only a real run shows.
    tokens = os.path.join(tmp, "tokens.bin")
    with open(tokens, "wb") as f:
        f.write(b"".join(i.to_bytes(2, "little") for i in list(range(16)) * 400))
    tok = write(os.path.join(tmp, "tok.yaml"), f"""\
model: {{vocab_size: 16, d_model: 16, n_head: 2, n_layer: 1, seq_len: 16}}
train: {{steps: 20, batch_size: 4, lr: 1.0e-2, warmup_steps: 2, seed: 0}}
data: {{task: tokens, path: {tokens}}}
output: {{log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 2}}
""")
    exps = {
        "slurmgrid": write(os.path.join(tmp, "slurmgrid.yaml"),
                           f"base: {tiny}\ngrid: {{n_head: [1, 2, 4]}}\nseeds: [0, 1]\n"
                           "width: fixed_width\n"),
        "slurmfail": write(os.path.join(tmp, "slurmfail.yaml"),
                           f"base: {tok}\ngrid: {{vocab_size: [16, 12]}}\n"),
        # one run that trains for minutes unless stopped (no attention snapshots to write)
        "slurmlong": write(os.path.join(tmp, "slurmlong.yaml"),
                           f"base: {tiny}\nset: {{train.steps: 5000000, output.log_every: 2000, "
                           "output.attn_every: 0, output.eval_every: 1000000}\n"),
    }
    return exps


def test_dry_run(cluster, exps, res):
    p = sweep(cluster, exps["slurmgrid"], "--slurm", "--dry-run", "--results", res, "-j", "2",
              "--cpus-per-task", "1", "--partition", "debug", "--time", "5",
              "--sbatch-arg=--comment=sweeptest")
    outdir = os.path.join(res, "slurmgrid")
    scripts = [os.path.join(d, "array.sbatch") for d in glob_dirs(outdir)]
    text = open(scripts[0]).read() if len(scripts) == 1 else ""
    check("--dry-run: exit 0, writes the array script, prints how to submit it",
          p.returncode == 0 and len(scripts) == 1 and "dry run: nothing submitted" in p.stdout
          and "sbatch " in p.stdout, p.stdout + p.stderr)
    runs = re.findall(r"^    (\S+)  # (\d+):", text, re.M)
    check("--dry-run: one array task per run, %N throttle from -j, sbatch options as #SBATCH",
          "#SBATCH --array=0-5%2\n" in text and "#SBATCH --cpus-per-task=1\n" in text
          and "#SBATCH --partition=debug\n" in text and "#SBATCH --time=5\n" in text
          and "#SBATCH --comment=sweeptest\n" in text
          and [r for r, _ in runs] == ["h1_dh16_s0", "h1_dh16_s1", "h2_dh8_s0", "h2_dh8_s1",
                                       "h4_dh4_s0", "h4_dh4_s1"]
          and "--run" in text, text)
    check("--dry-run: nothing submitted, nothing run", not cluster.queue()
          and not statuses(outdir) and not os.path.exists(os.path.join(outdir, "summary.csv")),
          str(cluster.queue()))
    shutil.rmtree(outdir)
    p = sweep(cluster, exps["slurmgrid"], "--partition", "debug", "--results", res)
    check("Slurm options without --slurm: exit 2 with a message",
          p.returncode == 2 and "--partition" in p.stderr and "--slurm" in p.stderr, p.stderr)


def test_submit(cluster, exps, res):
    t0 = time.time()
    p, job = submit(cluster, exps["slurmgrid"], res, "-j", "2", "--cpus-per-task", "1",
                    "--partition", "debug", "--time", "5")
    outdir = os.path.join(res, "slurmgrid")
    check("--slurm: exit 0, prints the job id of the array and the summary job",
          p.returncode == 0 and job is not None and summary_job(outdir, job) is not None,
          p.stdout + p.stderr)
    if not job:
        return None
    jobs = {job, summary_job(outdir, job)}
    done = cluster.wait_done(jobs, 90)
    check(f"the array and the summary job ran to the end ({time.time() - t0:.0f} s)", done,
          str(cluster.queue()))
    st = statuses(outdir)
    check("every array task wrote its run's complete results file",
          len(st) == 6 and set(st.values()) == {"complete"}, str(st))
    leftovers = [n for n in os.listdir(outdir) if n.endswith(".tmp")]
    check("no .tmp left behind (atomic results)", not leftovers, str(leftovers))
    bad = []
    for name in st:
        log = open(os.path.join(outdir, name + ".log")).read()
        if not (log.startswith("# ") and "--set train.threads=1 " in log.splitlines()[0]
                and re.search(rf"^# started .* \(slurm job {job}_\d+, pid \d+\)$", log, re.M)
                and f"{name}.h5: complete" in log
                and re.search(r"^# finished .*: exit status 0 \(complete\)", log, re.M)):
            bad.append(name)
    check("each run's log: command with train.threads = --cpus-per-task, Slurm job, harness "
          "output, exit status", not bad, str(bad))
    outs = [f for d in glob_dirs(outdir) for f in os.listdir(d) if f.startswith("task-")]
    check("one Slurm output file per array task", len(outs) == 6, str(outs))
    rows = read_csv(os.path.join(outdir, "summary.csv")) \
        if os.path.exists(os.path.join(outdir, "summary.csv")) else []
    check("the summary job wrote summary.csv with every run complete",
          len(rows) == 6 and all(r["status"] == "complete" for r in rows), str(rows[:1]))
    p = sweep(cluster, "--status", outdir)
    check("--status: 6 complete, 0 running, 0 failed, 0 missing; exit 0",
          p.returncode == 0 and "6 runs" in p.stdout
          and "6 complete, 0 running, 0 failed, 0 missing" in p.stdout, p.stdout + p.stderr)
    return job


def test_same_as_local(cluster, exps, res, res_local):
    p = sweep(cluster, exps["slurmgrid"], "-j", "2", "--threads", "1", "--results", res_local)
    path = os.path.join(res_local, "slurmgrid", "summary.csv")
    local = read_csv(path) if os.path.exists(path) else []
    slurm = read_csv(os.path.join(res, "slurmgrid", "summary.csv"))
    if not check("the same sweep run locally (1 thread per run) completes", p.returncode == 0
                 and len(local) == 6, f"exit status {p.returncode}\n{p.stdout[-800:]}{p.stderr}"):
        return
    cols = [c for c in (slurm[0] if slurm else {}) if c != "train_seconds"]
    diff = [(a["run"], c, a[c], b[c]) for a, b in zip(slurm, local) for c in cols if a[c] != b[c]]
    check(f"Slurm and local summaries are equal: {len(cols)} columns (all but train_seconds), "
          "final losses to every printed digit",
          len(slurm) == len(local) == 6 and cols == [c for c in local[0] if c != "train_seconds"]
          and "final_eval_loss" in cols and not diff, str(diff[:5]))
    p = sweep(cluster, "--status", os.path.join(res_local, "slurmgrid"))
    check("--status on the local sweep: 6 complete", p.returncode == 0
          and "6 complete, 0 running, 0 failed, 0 missing" in p.stdout, p.stdout + p.stderr)


def test_resubmit(cluster, exps, res, first_job):
    outdir = os.path.join(res, "slurmgrid")
    before = mtimes(outdir)
    queue_before = set(cluster.queue())
    p, job = submit(cluster, exps["slurmgrid"], res, "-j", "2", "--partition", "debug")
    check("--slurm again: nothing to submit (6 complete already), exit 0",
          p.returncode == 0 and job is None and "6 complete already, 0 to submit" in p.stdout
          and "nothing to submit" in p.stdout and set(cluster.queue()) == queue_before,
          p.stdout + p.stderr)
    # The same batch script submitted again by hand (a double submission, or a resubmission
    # after a failure): every task finds its complete result and exits at once.
    script = None
    for d in glob_dirs(outdir):
        if os.path.exists(os.path.join(d, "jobs")) and \
                f"array {first_job}\n" in open(os.path.join(d, "jobs")).read():
            script = os.path.join(d, "array.sbatch")
    r = cluster.client(["sbatch", "--parsable", script])
    job = r.stdout.strip().split(";")[0]
    if job.isdigit():
        cluster.jobs.add(job)
    done = job.isdigit() and cluster.wait_done({job}, 60)
    outs = [os.path.join(os.path.dirname(script), f"task-{job}_{i}.out") for i in range(6)]
    skipped = sum("its complete result exists" in open(o).read() for o in outs
                  if os.path.exists(o))
    check("sbatch of the same array script again: all 6 tasks ran and skipped their runs",
          done and skipped == 6, f"job {job} {r.stderr} skipped {skipped}")
    check("... and no results file or log was rewritten", mtimes(outdir) == before,
          str(set(mtimes(outdir).items()) ^ set(before.items())))


def test_failure(cluster, exps, res, res_local):
    p, job = submit(cluster, exps["slurmfail"], res, "--cpus-per-task", str(cluster.cpus))
    outdir = os.path.join(res, "slurmfail")
    check("a grid with a value the harness rejects only at run time passes the pre-check and "
          "is submitted", p.returncode == 0 and job is not None, p.stdout + p.stderr)
    if not job:
        return
    cluster.wait_done({job, summary_job(outdir, job)}, 90)
    p = sweep(cluster, "--status", outdir)
    out = p.stdout
    check("--status: 1 complete, 1 failed; exit 1",
          p.returncode == 1 and "1 complete, 0 running, 1 failed, 0 missing" in out, out)
    check("--status: the failed run with its exit status, Slurm job and the harness's message",
          re.search(rf"^failed\s+V12_s0\s+exit status 2 \(bad input\).*slurm job {job}_1", out,
                    re.M) is not None
          and re.search(r"\| .*holds token id 12 .*ids must be below model.vocab_size = 12",
                        out) is not None, out)
    log = open(os.path.join(outdir, "V16_s0.log")).read()
    check(f"train.threads follows --cpus-per-task {cluster.cpus} ($SLURM_CPUS_PER_TASK)",
          f"--set train.threads={cluster.cpus} " in log.splitlines()[0], log.splitlines()[0])
    rows = {r["run"]: r for r in read_csv(os.path.join(outdir, "summary.csv"))}
    check("the summary job's summary: the failed run's row says failed",
          rows.get("V12_s0", {}).get("status") == "failed"
          and rows.get("V16_s0", {}).get("status") == "complete", str(rows))

    # the same sweep run locally: --status says the same
    p = sweep(cluster, exps["slurmfail"], "--results", res_local)
    s = sweep(cluster, "--status", os.path.join(res_local, "slurmfail"))
    check("the same failure in a local sweep: --status reports it the same way",
          p.returncode == 1 and s.returncode == 1
          and "1 complete, 0 running, 1 failed, 0 missing" in s.stdout
          and re.search(r"^failed\s+V12_s0\s+exit status 2 \(bad input\)", s.stdout, re.M)
          and "holds token id 12" in s.stdout, s.stdout + p.stdout[-300:])

    before = mtimes(outdir)
    p, job2 = submit(cluster, exps["slurmfail"], res, "--cpus-per-task", str(cluster.cpus))
    ok = p.returncode == 0 and job2 is not None and "1 complete already, 1 to submit" in p.stdout
    if job2:
        cluster.wait_done({job2, summary_job(outdir, job2)}, 90)
    after = mtimes(outdir)
    check("resubmission: only the failed run is submitted and rerun; the complete one is "
          "untouched", ok and after["V16_s0.h5"] == before["V16_s0.h5"]
          and after["V16_s0.log"] == before["V16_s0.log"]
          and after["V12_s0.log"] != before["V12_s0.log"], p.stdout + p.stderr)


def _children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def test_running(cluster, exps, res):
    outdir = os.path.join(res, "slurmlong")
    p, job = submit(cluster, exps["slurmlong"], res)
    check("a long run is submitted", p.returncode == 0 and job is not None, p.stdout + p.stderr)
    if not job:
        return

    def running():
        # the runner holds the run's lock (its pid shows) and the harness is training (a step)
        s = sweep(cluster, "--status", outdir)
        return s if re.search(rf"^running\s+s0\s+on .*\(slurm job {job}_0, pid \d+\).*step "
                              r"\d+/5000000", s.stdout, re.M) else None
    s = wait_for(running, 60, 0.5)
    check("--status: a running array task, with its Slurm job, node and step",
          s and "0 complete, 1 running, 0 failed, 0 missing" in s.stdout,
          s.stdout if s else sweep(cluster, "--status", outdir).stdout)
    if not s:
        return

    # "Node failure": the task's runner and harness die at once, with no chance to clean up.
    holder = runstate.lock_holder(outdir, "s0") or ""
    m = re.search(r"pid (\d+)\)", holder)
    pids = [int(m.group(1))] + _children(int(m.group(1))) if m else []
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    cluster.wait_done({job}, 30)
    s = sweep(cluster, "--status", outdir)
    check("after a node failure (the task SIGKILLed): --status reports it failed, stopped "
          "without finishing", len(pids) == 2 and s.returncode == 1
          and "0 running, 1 failed" in s.stdout
          and re.search(r"^failed\s+s0\s+stopped without finishing", s.stdout, re.M),
          f"pids {pids} holder {holder!r}\n{s.stdout}")

    p, job = submit(cluster, exps["slurmlong"], res)
    check("resubmission after the failure reruns it", p.returncode == 0 and job is not None
          and "0 complete already, 1 to submit" in p.stdout, p.stdout + p.stderr)
    if not job or not wait_for(running, 60, 0.5):
        check("the resubmitted run runs", False, sweep(cluster, "--status", outdir).stdout)
        return
    cluster.client(["scancel", job])
    cluster.wait_done({job}, 60)
    s = sweep(cluster, "--status", outdir)
    check("scancel: --status reports it interrupted (the harness saved its results: resumable "
          "at its step) with Slurm's message",
          re.search(r"^interrupted\s+s0\s+an interrupted run, resumable at step \d+ .*exit status "
                    r"130 \(interrupted\)", s.stdout, re.M)
          and "CANCELLED" in s.stdout
          and results.read_status(os.path.join(outdir, "s0.h5")) == "interrupted", s.stdout)


def main():
    keep = "--keep" in sys.argv[1:]
    t0 = time.time()
    problems = []
    if os.geteuid() != 0:
        problems.append("needs root (slurmd and munged run as root here)")
    missing = [c for c in DAEMONS + CLIENTS if not shutil.which(c, path=os.environ.get(
        "PATH", "") + ":/usr/sbin:/sbin")]
    if missing:
        problems.append("not installed: " + ", ".join(missing) + " (apt-get install slurm-wlm "
                        "munge; scripts/install-deps)")
    if not os.access(harness.HARNESS, os.X_OK):
        problems.append(f"{harness.HARNESS} not built: run `make` first")
    if problems:
        for p in problems:
            print(f"FAIL - Slurm test: {p}")
        print(f"0 passed, {len(problems)} failed")
        return 1
    os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"

    tmp = tempfile.mkdtemp(prefix="test_slurm.")
    os.chmod(tmp, 0o755)
    cluster = Cluster(tmp)

    def on_alarm(signum, frame):
        raise TimeLimit(f"the whole test took more than {TOTAL_SECONDS} s")

    def on_signal(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_signal)
    signal.alarm(TOTAL_SECONDS)
    try:
        cluster.start()
        check(f"a single-node Slurm is up (munged, slurmctld, slurmd; {cluster.cpus} CPUs, "
              f"{time.time() - t0:.1f} s)", True)
        exps = make_inputs(tmp)
        res, res_local = os.path.join(tmp, "results"), os.path.join(tmp, "results_local")
        run_check("dry run", lambda: test_dry_run(cluster, exps, res), passthrough=TimeLimit)
        job = []
        run_check("submit", lambda: job.append(test_submit(cluster, exps, res)), passthrough=TimeLimit)
        if job and job[0]:
            run_check("same summary as a local sweep", lambda: test_same_as_local(cluster, exps, res, res_local), passthrough=TimeLimit)
            run_check("resubmit", lambda: test_resubmit(cluster, exps, res, job[0]), passthrough=TimeLimit)
        run_check("failure", lambda: test_failure(cluster, exps, res, res_local), passthrough=TimeLimit)
        run_check("running, node failure, scancel", lambda: test_running(cluster, exps, res), passthrough=TimeLimit)
    except (TimeLimit, KeyboardInterrupt, RuntimeError) as e:
        check("the Slurm test ran to its end", False, f"{type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        t_stop = time.time()
        started = {name: p.pid for name, p in cluster.procs.items()}
        alive = cluster.stop()
        print(f"# stopped the daemons in {time.time() - t_stop:.1f} s", flush=True)
        check("the daemons this test started are stopped (pids " + ", ".join(
            f"{n} {pid}" for n, pid in started.items()) + ")", started and not alive,
            f"still running: {alive}")
    return end_suite(tmp, keep, t0)


if __name__ == "__main__":
    sys.exit(main())
