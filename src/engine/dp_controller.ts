// The DP controller (SGLang managers/data_parallel_controller.py): with --dp-size > 1 the Engine talks to dp engine
// cores, one per DP rank, each in its own worker thread with its own scheduler, requests, radix cache and KV pool, and
// this transport dispatches between them. Without --enable-dp-attention each core is an independent replica of tp
// ranks; with it, each core is one attention-DP group of the one TP group (the communicators are made here and
// handed to every group), and the cores step in lockstep (executor/dp_attention_runner.ts): every message a group
// receives carries a sequence number and every other group is sent a `kick` with it, so no group stops stepping
// while a message is on its way to another.
// Requests are spread by --load-balance-method (unless they name a data_parallel_rank): round_robin (and auto),
// shortest_queue (fewest requests in flight), minimum_tokens (fewest prompt + generated tokens in flight); control messages go to every core and their replies
// are combined (load: sums plus each group's own load in `dpLoads`).
import { availableParallelism } from 'node:os';
import { InvalidRequestError } from '../common/index.js';
import type { Logger } from '../common/index.js';
import { breakGroups, defaultThreadsPerRank, dpAttnGroupRefs, nodeOfRank, type DpAttnGroupRefs, type DpAttnNodes, type RankRange } from '../executor/index.js';
import type { FromCoreMsg, ToCoreMsg } from './messages.js';
import { RemoteCoreTransport } from './remote_core.js';
import { WorkerTransport, type CoreTransport } from './transport.js';
import type { EngineLoad, EngineOptions } from './types.js';

/** --load-balance-method choices (SGLang LoadBalanceMethod names). */
export const LOAD_BALANCE_METHODS = ['auto', 'round_robin', 'shortest_queue', 'minimum_tokens', 'follow_bootstrap_room'] as const;

/**
 * `auto` as SGLang resolves it: follow_bootstrap_room on a PD prefill server (the DP rank of a request is its
 * bootstrap room mod dp_size, so the decode side knows it without asking), round_robin otherwise.
 */
export function resolveLoadBalanceMethod(method: string, disaggregationMode?: 'prefill' | 'decode'): string {
  if (method !== 'auto') return method;
  return disaggregationMode === 'prefill' ? 'follow_bootstrap_room' : 'round_robin';
}

/** Where a request went and what it weighs. */
interface InFlight {
  readonly dpRank: number;
  tokens: number;
}

/** Picks a DP rank for each request. */
export class DpLoadBalancer {
  private next = 0;
  /** Requests in flight per DP rank. */
  readonly reqs: number[];
  /** Prompt + generated tokens in flight per DP rank. */
  readonly tokens: number[];

  /** @throws InvalidRequestError for an unknown method */
  constructor(readonly dpSize: number, readonly method: string = 'auto') {
    if (!(LOAD_BALANCE_METHODS as readonly string[]).includes(method)) {
      throw new InvalidRequestError(`argument --load-balance-method: invalid choice: '${method}' (choose from ${LOAD_BALANCE_METHODS.map((m) => `'${m}'`).join(', ')})`, 'load_balance_method');
    }
    this.reqs = new Array<number>(dpSize).fill(0);
    this.tokens = new Array<number>(dpSize).fill(0);
  }

  /**
   * The DP rank of the next request (ties: the lowest rank after the round-robin cursor).
   * @param room the request's bootstrap room (follow_bootstrap_room: room mod dp_size; without one, round robin)
   */
  pick(room?: number): number {
    if (this.method === 'follow_bootstrap_room' && room !== undefined) return room % this.dpSize;
    if (this.method === 'shortest_queue' || this.method === 'minimum_tokens') {
      const key = this.method === 'shortest_queue' ? this.reqs : this.tokens;
      let best = -1;
      for (let i = 0; i < this.dpSize; i++) {
        const g = (this.next + i) % this.dpSize;
        if (best < 0 || key[g] < key[best]) best = g;
      }
      this.next = (best + 1) % this.dpSize;
      return best;
    }
    const g = this.next;
    this.next = (this.next + 1) % this.dpSize;
    return g;
  }
}

/** This process's part of a DP-attention layout (made once per process: its in-process groups live here). */
export interface DpAttnProcessPlan {
  readonly groups: DpAttnGroupRefs;
  /** The ranks of this process (node); absent on one node (every rank). */
  readonly localRanks?: RankRange;
  /** Compute threads per rank: this machine's cores over the ranks of this process. */
  readonly numThreads: number;
  /** DP ranks whose leader (attn_tp rank 0) runs in this process. */
  readonly ledHere: readonly number[];
}

/**
 * Plans this process's part of `--tp T --dp D --enable-dp-attention` (on one node, or node `nodes.nodeRank`).
 * @throws InvalidRequestError when dp does not divide tp
 */
export function dpAttnProcessPlan(options: EngineOptions, nodes: DpAttnNodes | null): DpAttnProcessPlan {
  const dp = options.dpSize ?? 1;
  const tp = options.tpSize ?? 1;
  if (tp % dp !== 0) throw new InvalidRequestError(`--enable-dp-attention needs tp_size % dp_size == 0, got ${tp} % ${dp} = ${tp % dp}`, 'dp_size');
  const a = tp / dp;
  const here = nodes?.nodeRank ?? 0;
  return {
    groups: dpAttnGroupRefs(tp, dp, (options.distTimeout ?? 1800) * 1000, nodes),
    ...(nodes ? { localRanks: { first: here * nodes.ranksPerNode, count: nodes.ranksPerNode } } : {}),
    numThreads: options.numThreads ?? defaultThreadsPerRank(nodes ? nodes.ranksPerNode : tp, availableParallelism()),
    ledHere: Array.from({ length: dp }, (_, g) => g).filter((g) => nodeOfRank(g * a, nodes) === here),
  };
}

/** The options of attention-DP group g's engine core (a worker thread of the process that planned `plan`). */
export function dpAttnCoreOptions(options: EngineOptions, plan: DpAttnProcessPlan, g: number): EngineOptions {
  const { dpNodes: _nodes, ...rest } = options;
  return { ...rest, numThreads: plan.numThreads, dpAttention: { dpRank: g, groups: plan.groups, ...(plan.localRanks ? { localRanks: plan.localRanks } : {}) } };
}

/** CoreTransport over dp engine cores (worker threads). */
export class DpControllerTransport implements CoreTransport {
  private readonly cores: CoreTransport[] = [];
  private readonly lb: DpLoadBalancer;
  private readonly lockstep: boolean;
  private handler: (msg: FromCoreMsg) => void = () => {};
  private readonly owner = new Map<string, InFlight>();
  private seq = 0;
  private readonly ready: (FromCoreMsg & { type: 'ready' })[] = [];
  private failedInit = false;
  /** Replies being combined, by request id. */
  private readonly pending = new Map<number, { type: string; values: unknown[] }>();

  /**
   * Starts dp engine cores (they load their models in their threads; `ready` is sent once all are).
   * @throws InvalidRequestError for a layout that does not split (dp-attention needs tp % dp == 0)
   */
  constructor(options: EngineOptions, private readonly logger: Logger) {
    const dp = options.dpSize ?? 1;
    const tp = options.tpSize ?? 1;
    this.lockstep = options.enableDpAttention === true;
    this.lb = new DpLoadBalancer(dp, resolveLoadBalanceMethod(options.loadBalanceMethod ?? 'auto', options.disaggregation?.mode));
    const timeoutMs = (options.distTimeout ?? 1800) * 1000;
    const nodes = options.dpNodes ?? null;
    const plan = this.lockstep ? dpAttnProcessPlan(options, nodes) : null;
    // threads per rank (plain DP): every rank of every replica shares this machine's cores
    const numThreads = options.numThreads ?? defaultThreadsPerRank(tp * dp, availableParallelism());
    for (let g = 0; g < dp; g++) {
      const remote = nodes?.remoteCores.find((c) => c.dpRank === g);
      const core: CoreTransport = remote
        ? new RemoteCoreTransport(remote.addr, g, `node ${remote.nodeRank} (ranks ${g * (tp / dp)}..${(g + 1) * (tp / dp) - 1})`, timeoutMs)
        : new WorkerTransport(plan ? dpAttnCoreOptions(options, plan, g) : { ...options, numThreads, dpRank: g });
      core.onMessage((m) => this.fromCore(g, m));
      // a group that dies breaks the (in-process) TP group: the others stop waiting for it in the step exchange at once
      if (plan) core.onFatal((e) => breakGroups([plan.groups.tp], [], g * (tp / dp), `DP rank ${g} died: ${e.message}`));
      this.cores.push(core);
    }
    const remote = nodes ? `; groups led by other nodes: ${nodes.remoteCores.map((c) => `DP${c.dpRank} on node ${c.nodeRank} (${c.addr})`).join(', ')}` : '';
    logger.info(`DP controller: ${dp} ${this.lockstep ? `attention-DP groups of attn_tp_size ${tp / dp} (tp_size ${tp})` : `replicas of tp_size ${tp}`}, load_balance_method=${this.lb.method}${remote}`);
  }

  send(msg: ToCoreMsg): void {
    switch (msg.type) {
      case 'generate': {
        // a rank the request asks for (data_parallel_rank from a --dp-aware router) wins over the balancer
        const want = msg.req.dataParallelRank;
        const g = want !== undefined && want >= 0 && want < this.cores.length ? want : this.lb.pick(msg.req.bootstrap?.room);
        const tokens = msg.req.inputIds.length;
        this.owner.set(msg.req.rid, { dpRank: g, tokens });
        this.lb.reqs[g]++;
        this.lb.tokens[g] += tokens;
        this.toCore(g, msg);
        return;
      }
      case 'abort': {
        const o = this.owner.get(msg.rid);
        if (o) this.toCore(o.dpRank, msg);
        else this.toAll(msg);
        return;
      }
      case 'start_profile':
      case 'stop_profile':
        this.toCore(0, msg); // the profile of DP rank 0's core (SGLang profiles each rank into its own file)
        return;
      case 'flush':
      case 'load':
        this.pending.set(msg.id, { type: msg.type, values: [] });
        this.toAll(msg);
        return;
      default:
        this.toAll(msg);
    }
  }

  /** Sends `msg` to core g with the next seq; under lockstep every other core gets a kick with it. */
  private toCore(g: number, msg: ToCoreMsg): void {
    const seq = ++this.seq;
    this.cores[g].send({ ...msg, seq } as ToCoreMsg);
    if (this.lockstep) for (let h = 0; h < this.cores.length; h++) if (h !== g) this.cores[h].send({ type: 'kick', seq });
  }

  private toAll(msg: ToCoreMsg): void {
    const seq = ++this.seq;
    for (const c of this.cores) c.send({ ...msg, seq } as ToCoreMsg);
  }

  private fromCore(g: number, m: FromCoreMsg): void {
    switch (m.type) {
      case 'ready':
        this.ready[g] = m;
        if (this.ready.filter(Boolean).length === this.cores.length) this.handler(this.ready[0]); // DP rank 0's facts
        return;
      case 'init_error':
        if (!this.failedInit) {
          this.failedInit = true;
          this.handler({ ...m, message: `DP rank ${g}: ${m.message}` });
        }
        return;
      case 'outputs':
        for (const o of m.outputs) {
          const f = this.owner.get(o.rid);
          if (!f) continue;
          const add = o.outputIds.length;
          f.tokens += add;
          this.lb.tokens[f.dpRank] += add;
          if (o.finishReason) this.release(o.rid);
        }
        this.handler(m);
        return;
      case 'req_error':
        this.release(m.rid);
        this.handler(m);
        return;
      case 'reply': {
        const p = this.pending.get(m.id);
        if (!p) return this.handler(m); // profile replies (DP rank 0 only)
        p.values[g] = m.value;
        if (p.values.filter((v) => v !== undefined).length < this.cores.length) return;
        this.pending.delete(m.id);
        const value = p.type === 'flush' ? p.values.every(Boolean) : combineLoads(p.values as EngineLoad[]);
        this.handler({ type: 'reply', id: m.id, value });
        return;
      }
      case 'lockstep_wake':
        if (this.lockstep) this.toAll({ type: 'kick', seq: 0 });
        return;
      default:
        this.handler(m); // 'fatal': the engine fails every request and the server exits
    }
  }

  private release(rid: string): void {
    const f = this.owner.get(rid);
    if (!f) return;
    this.owner.delete(rid);
    this.lb.reqs[f.dpRank]--;
    this.lb.tokens[f.dpRank] -= f.tokens;
  }

  onMessage(handler: (msg: FromCoreMsg) => void): void {
    this.handler = handler;
  }

  onFatal(handler: (err: Error) => void): void {
    this.cores.forEach((c, g) => c.onFatal((e) => handler(new Error(`DP rank ${g}: ${e.message}`))));
  }

  async close(): Promise<void> {
    await Promise.all(this.cores.map((c) => c.close()));
  }
}

/** The engine's load under DP: sums of every group's counters, token usage over their capacities, and each group's own. */
export function combineLoads(loads: readonly EngineLoad[]): EngineLoad {
  const sum = (f: (l: EngineLoad) => number | undefined): number => loads.reduce((s, l) => s + (f(l) ?? 0), 0);
  const used = sum((l) => l.numUsedTokens);
  const cap = sum((l) => (l.tokenUsage > 0 ? l.numUsedTokens / l.tokenUsage : 0));
  const prompt = loads.length;
  return {
    numRunningReqs: sum((l) => l.numRunningReqs),
    numQueueReqs: sum((l) => l.numQueueReqs),
    numUsedTokens: used,
    tokenUsage: cap > 0 ? used / cap : sum((l) => l.tokenUsage) / Math.max(1, prompt),
    evictableTokens: sum((l) => l.evictableTokens),
    genThroughput: sum((l) => l.genThroughput),
    cacheHitRate: sum((l) => l.cacheHitRate) / Math.max(1, prompt),
    numRetractedReqs: sum((l) => l.numRetractedReqs),
    kvCacheCommittedBytes: sum((l) => l.kvCacheCommittedBytes),
    numGrammarQueueReqs: sum((l) => l.numGrammarQueueReqs),
    numSoRequests: sum((l) => l.numSoRequests),
    ...(loads.some((l) => l.avgSpecAcceptLength !== undefined) ? specOf(loads) : {}),
    ...(loads[0]?.disaggregation ? { disaggregation: combineDisaggregation(loads.map((l) => l.disaggregation!)) } : {}),
    dpLoads: loads,
  };
}

/** Speculative averages over the groups that verified anything (each group's own average stays in dpLoads). */
function specOf(loads: readonly EngineLoad[]): Pick<EngineLoad, 'avgSpecAcceptLength' | 'specAcceptRate'> {
  const active = loads.filter((l) => (l.avgSpecAcceptLength ?? 0) > 0);
  const mean = (f: (l: EngineLoad) => number | undefined): number => (active.length > 0 ? active.reduce((s, l) => s + (f(l) ?? 0), 0) / active.length : 0);
  return { avgSpecAcceptLength: mean((l) => l.avgSpecAcceptLength), specAcceptRate: mean((l) => l.specAcceptRate) };
}

/** The PD counters of every group, summed (the mode, backend and per-token figures are the groups'). */
function combineDisaggregation(ds: readonly NonNullable<EngineLoad['disaggregation']>[]): NonNullable<EngineLoad['disaggregation']> {
  const out: Record<string, unknown> = { ...ds[0] };
  for (const [k, v] of Object.entries(ds[0])) {
    if (typeof v === 'number' && k !== 'attnTpSize' && k !== 'kvBytesPerToken') out[k] = ds.reduce((a, d) => a + ((d as unknown as Record<string, number>)[k] ?? 0), 0);
  }
  if (ds[0].kvDigests) out['kvDigests'] = Object.assign({}, ...ds.map((d) => d.kvDigests ?? {}));
  return out as unknown as NonNullable<EngineLoad['disaggregation']>;
}
