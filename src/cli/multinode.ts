// Multi-node serving (SGLang's --nnodes / --node-rank / --dist-init-addr / --dist-timeout): one tsglang process per
// node, all ranks of node k are threads of that process (global ranks k·tp/nnodes …, SGLang's order). Node 0 serves
// the TCP store and HTTP; every other node serves no HTTP. Under TP/EP (and prefill CP) the other nodes only run their
// ranks and follow global rank 0's steps; the TP/world/CP groups span the nodes through Gloo (the whole group, also
// between ranks of one node: one code path, and sums in rank order = the same bits as one node). Under
// --enable-dp-attention a node also hosts the engine cores of the attention-DP groups its ranks lead (attn_dp_rank =
// tp_rank // attn_tp_size), which node 0's DP controller reaches over TCP (engine/remote_core.ts); the TP group is
// Gloo, a group inside one node is in-process. Plain DP replicas across nodes are refused, as SGLang does.
// Under --pp-size the world is tp · pp ranks (global rank = stage · tp + TP rank) split into contiguous runs per node,
// as SGLang places them (a node holds pp_size / nnodes whole stages, or nnodes / pp_size nodes share a stage); every
// stage's TP (and CP) groups are Gloo groups and the stage-to-stage links two-rank Gloo groups, named alike on every
// node (executor/pp_layout.ts); node 0 runs stage 0 and the scheduler, the other nodes only their stages' ranks.
// A node that dies or never joins stops every other node with an error naming it, its ranks and --dist-init-addr.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidRequestError, parseKvCacheDtype, UnsupportedFeatureError } from '../common/index.js';
import type { Logger } from '../common/index.js';
import { attnCpSizeOf, engineSlice, epSizeOf, readDistEnv, type KernelEnv, type ServerArgs } from '../config/index.js';
import { bootstrapNodes, loadGlooAddon } from '../distributed/index.js';
import type { GlooGroupRef, NodeBootstrap } from '../distributed/index.js';
import { DpCoreHost, dpAttnCoreOptions, dpAttnProcessPlan, type DpNodesPlan, type EngineOptions } from '../engine/index.js';
import { makePpLayout, nodeOfRank, ppRankName, runNodeRanks, runRemoteLedDpAttnRanks } from '../executor/index.js';
import type { DpAttnNodes, TpNodes } from '../executor/index.js';

/** torch.distributed's default timeout (30 min) when --dist-timeout is not given. */
const DEFAULT_DIST_TIMEOUT_S = 1800;

/** A joined cluster: the bootstrap (liveness, shutdown) and this node's rank layout for the engine. */
export interface Cluster {
  readonly bootstrap: NodeBootstrap;
  readonly tpNodes: TpNodes;
  /** The DP-attention layout (--enable-dp-attention with --dp-size > 1), else null. */
  readonly dpNodes: DpAttnNodes | null;
  readonly timeoutMs: number;
}

/**
 * Joins the other nodes (node 0 first serves the store on --dist-init-addr).
 * @throws UnsupportedFeatureError when Gloo is not installed (naming libgloo-dev); InvalidRequestError for a missing
 *   --dist-init-addr or a --tp-size that --nnodes does not divide; DistributedError for every start-up fault
 */
export async function joinCluster(args: Readonly<ServerArgs>, modelPath: string, logger: Logger): Promise<Cluster> {
  const gloo = loadGlooAddon();
  if (!gloo.addon) throw new UnsupportedFeatureError(`multi-node serving (--nnodes ${args.nnodes}) needs Gloo: ${gloo.reason}`);
  if (!args.distInitAddr) throw new InvalidRequestError(`argument --dist-init-addr: HOST:PORT of node 0 is required with --nnodes ${args.nnodes}`, 'dist-init-addr');
  const worldSize = args.tpSize * args.ppSize;
  if (worldSize % args.nnodes !== 0) {
    throw new InvalidRequestError(`argument --tp-size: ${worldSize} ranks (tp_size × pp_size) do not split over --nnodes ${args.nnodes} (tp_size must be divisible by number of nodes)`, 'tp-size');
  }
  // SGLang's rank ranges per node (engine.py _calculate_rank_ranges): a node holds pp_size // nnodes whole stages, or
  // nnodes // pp_size nodes share a stage's TP ranks; with global rank = stage · tp + TP rank both are a contiguous run
  const ranksPerNode = worldSize / args.nnodes;
  const timeoutMs = (args.distTimeout ?? DEFAULT_DIST_TIMEOUT_S) * 1000;
  const config = createHash('sha256').update(readFileSync(join(modelPath, 'config.json'))).update(JSON.stringify(args.jsonModelOverrideArgs)).digest('hex').slice(0, 12);
  const dpAttention = args.enableDpAttention && args.dpSize > 1;
  const fingerprint = `tp_size=${args.tpSize} pp_size=${args.ppSize} pp_partition=${readDistEnv().ppLayerPartition ?? 'default'} ep_size=${epSizeOf(args)} dp_size=${args.dpSize} enable_dp_attention=${dpAttention} attn_cp_size=${args.attnCpSize} ` +
    `enable_prefill_cp=${args.enablePrefillCp} speculative_algorithm=${args.speculativeAlgorithm} config.json#${config}`;
  logger.info(`node ${args.nodeRank} of ${args.nnodes}: joining through the TCP store at --dist-init-addr ${args.distInitAddr}${args.nodeRank === 0 ? ' (served here)' : ''}; ranks ${args.nodeRank * ranksPerNode}..${(args.nodeRank + 1) * ranksPerNode - 1} on this node`);
  const bootstrap = await bootstrapNodes({ nnodes: args.nnodes, nodeRank: args.nodeRank, distInitAddr: args.distInitAddr, timeoutMs, ranksPerNode, fingerprint });
  logger.info(`all ${args.nnodes} nodes joined (${bootstrap.nodes.map((n) => `node ${n.nodeRank}: ${n.addr}`).join(', ')})`);
  // PP: every group and link of the tp × pp layout (each stage's TP and CP groups, the stage-to-stage links)
  // (a link is a two-rank Gloo group; each end names the rank at the other end, and its node, in errors)
  const where = (rank: number): string => `${ppRankName(rank, args.tpSize)} on node ${Math.floor(rank / ranksPerNode)}`;
  const pp = args.ppSize > 1 ? makePpLayout(args.tpSize, args.ppSize, (name, size) => bootstrap.groupRef(name, size), (name, from, to) => {
    const { spec } = bootstrap.groupRef(name, 2);
    return { send: { backend: 'gloo', name, side: 'send', spec, peer: where(to) }, recv: { backend: 'gloo', name, side: 'recv', spec, peer: where(from) } };
  }, attnCpSizeOf(args)) : null;
  const tpNodes: TpNodes = pp
    ? { world: pp.world as GlooGroupRef, tp: pp.tp[0] as GlooGroupRef, firstRank: bootstrap.firstRank, ranksPerNode, pp }
    : { world: bootstrap.groupRef('world', args.tpSize), tp: bootstrap.groupRef('tp', args.tpSize), firstRank: bootstrap.firstRank, ranksPerNode };
  const dpNodes: DpAttnNodes | null = dpAttention ? { tp: tpNodes.tp, nodeRank: args.nodeRank, ranksPerNode } : null;
  return { bootstrap, tpNodes, dpNodes, timeoutMs };
}

/**
 * Node 0 under DP-attention: where the engine cores of the groups led by other nodes listen (each such node publishes
 * its core host's address in the store once it listens).
 * @throws DistributedError when a node does not publish it within --dist-timeout
 */
export async function dpNodesPlan(args: Readonly<ServerArgs>, cluster: Cluster): Promise<DpNodesPlan> {
  const nodes = cluster.dpNodes!;
  const a = args.tpSize / args.dpSize;
  const remoteCores: DpNodesPlan['remoteCores'][number][] = [];
  const addrs = new Map<number, string>();
  for (let g = 0; g < args.dpSize; g++) {
    const k = nodeOfRank(g * a, nodes);
    if (k === nodes.nodeRank) continue;
    if (!addrs.has(k)) addrs.set(k, await cluster.bootstrap.lookup(`dp_core/${k}`));
    remoteCores.push({ dpRank: g, nodeRank: k, addr: addrs.get(k)! });
  }
  return { ...nodes, remoteCores };
}

/**
 * A node > 0 under DP-attention: hosts the engine cores of the groups its ranks lead (node 0's DP controller connects
 * to them) and runs its ranks of groups led by another node, until node 0 shuts down, a node is lost, a rank or core
 * fails or a signal arrives.
 * @returns the exit code: 0 after node 0's shutdown, 1 on a fault, 130/143 on SIGINT/SIGTERM
 */
async function runDpFollowerNode(args: Readonly<ServerArgs>, modelPath: string, env: KernelEnv, cluster: Cluster, logger: Logger): Promise<number> {
  const { bootstrap } = cluster;
  const nodes = cluster.dpNodes!;
  const base: EngineOptions = { ...engineSlice(args, modelPath), kernelEnv: env };
  const plan = dpAttnProcessPlan(base, nodes);
  const host = plan.ledHere.length > 0 ? await DpCoreHost.listen(bootstrap.bindHost, plan.ledHere, (g) => dpAttnCoreOptions(base, plan, g), logger) : null;
  if (host) await bootstrap.publish(`dp_core/${args.nodeRank}`, `${bootstrap.bindHost}:${host.port}`);
  logger.info(`node ${args.nodeRank}: no HTTP server on this node (node 0 serves); ` +
    (host ? `engine cores of DP ranks [${plan.ledHere.join(', ')}] for node 0's DP controller on ${bootstrap.bindHost}:${host.port}` : 'no attention-DP group is led by a rank of this node'));
  const ranks = runRemoteLedDpAttnRanks({
    tpSize: args.tpSize, epSize: epSizeOf(args), dpSize: args.dpSize, modelPath, overrides: args.jsonModelOverrideArgs, threads: plan.numThreads,
    kernelEnv: env, kvCacheDtype: parseKvCacheDtype(args.kvCacheDtype) ?? 'auto', groups: plan.groups, ...(plan.localRanks ? { localRanks: plan.localRanks } : {}),
  }, nodes, logger);
  // (those ranks leaving is not the end: the hosted cores run until node 0's shutdown)
  const running = ranks.then(() => new Promise<void>(() => undefined));
  return followUntilDone(args, bootstrap, running, logger, async (outcome) => {
    // node 0 shut its cores down before announcing; a fault or a signal stops them here
    if (outcome === 'shutdown' && host) await Promise.race([host.allExited(), new Promise((r) => setTimeout(r, 5000).unref())]);
    await host?.close();
  });
}

/**
 * A node > 0: runs this node's ranks until node 0 shuts down, a node is lost, a rank fails or a signal arrives.
 * @returns the exit code: 0 after node 0's shutdown, 1 on a fault, 130/143 on SIGINT/SIGTERM
 */
export async function runFollowerNode(args: Readonly<ServerArgs>, modelPath: string, env: KernelEnv, cluster: Cluster, logger: Logger): Promise<number> {
  if (cluster.dpNodes) return runDpFollowerNode(args, modelPath, env, cluster, logger);
  const { bootstrap } = cluster;
  logger.info(`node ${args.nodeRank}: no HTTP server on this node (node 0 serves); running ${args.ppSize > 1 ? 'pipeline-stage' : 'TP'} ranks only`);
  const ranks = runNodeRanks({
    modelPath,
    overrides: args.jsonModelOverrideArgs,
    tpSize: args.tpSize,
    epSize: epSizeOf(args),
    ...(args.numThreads !== null ? { threadsPerRank: args.numThreads } : {}),
    kernelEnv: env,
    kvCacheDtype: parseKvCacheDtype(args.kvCacheDtype) ?? 'auto',
    timeoutMs: cluster.timeoutMs,
    nodes: cluster.tpNodes,
    ...(args.attnCpSize > 1 || args.enablePrefillCp ? { attnCpSize: engineSlice(args, modelPath).attnCpSize } : {}),
    logger,
  });
  // The ranks get node 0's shutdown step too; give them a moment to leave their loops.
  return followUntilDone(args, bootstrap, ranks, logger, async (outcome) => {
    if (outcome === 'shutdown') await Promise.race([ranks.catch(() => undefined), new Promise((r) => setTimeout(r, 5000).unref())]);
  });
}

/**
 * Waits for the end of a node > 0: its ranks done, node 0's shutdown, a fault (a lost node, a failed rank) or a
 * signal; runs `stop` with that outcome, leaves the cluster and returns the exit code.
 */
async function followUntilDone(args: Readonly<ServerArgs>, bootstrap: NodeBootstrap, ranks: Promise<void>, logger: Logger, stop: (outcome: string) => Promise<void>): Promise<number> {
  type Outcome = { kind: 'done' } | { kind: 'failed'; err: Error } | { kind: 'signal'; sig: string } | { kind: 'shutdown' };
  const outcome = await new Promise<Outcome>((resolve) => {
    ranks.then(() => resolve({ kind: 'done' }), (err: Error) => resolve({ kind: 'failed', err }));
    bootstrap.onFatal((err) => resolve({ kind: 'failed', err }));
    bootstrap.waitShutdown().then(() => resolve({ kind: 'shutdown' }), () => undefined);
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve({ kind: 'signal', sig }));
  });
  await stop(outcome.kind);
  await bootstrap.close();
  if (outcome.kind === 'done' || outcome.kind === 'shutdown') {
    logger.info(`node ${args.nodeRank}: node 0 shut down; exiting`);
    return 0;
  }
  if (outcome.kind === 'signal') {
    logger.info(`Received ${outcome.sig}, shutting down node ${args.nodeRank}`);
    return outcome.sig === 'SIGINT' ? 130 : 143;
  }
  logger.error(`node ${args.nodeRank}: ${outcome.err.message}`);
  return 1;
}
