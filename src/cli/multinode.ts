// Multi-node serving (SGLang's --nnodes / --node-rank / --dist-init-addr / --dist-timeout): one tsglang process per
// node, all ranks of node k are threads of that process. Node 0 serves the TCP store and HTTP; every other node only
// runs its ranks (no HTTP) and follows global rank 0's steps. The TP/world groups span the nodes through Gloo (the
// whole group, also between ranks of one node: one code path, and sums in rank order = the same bits as one node).
// A node that dies or never joins stops every other node with an error naming it, its ranks and --dist-init-addr.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidRequestError, parseKvCacheDtype, UnsupportedFeatureError } from '../common/index.js';
import type { Logger } from '../common/index.js';
import type { KernelEnv, ServerArgs } from '../config/index.js';
import { bootstrapNodes, loadGlooAddon } from '../distributed/index.js';
import type { NodeBootstrap } from '../distributed/index.js';
import { runNodeRanks } from '../executor/index.js';
import type { TpNodes } from '../executor/index.js';

/** torch.distributed's default timeout (30 min) when --dist-timeout is not given. */
const DEFAULT_DIST_TIMEOUT_S = 1800;

/** A joined cluster: the bootstrap (liveness, shutdown) and this node's rank layout for the engine. */
export interface Cluster {
  readonly bootstrap: NodeBootstrap;
  readonly tpNodes: TpNodes;
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
  if (args.tpSize % args.nnodes !== 0) {
    throw new InvalidRequestError(`argument --tp-size: ${args.tpSize} ranks do not split over --nnodes ${args.nnodes} (tp_size % nnodes must be 0)`, 'tp-size');
  }
  const ranksPerNode = args.tpSize / args.nnodes;
  const timeoutMs = (args.distTimeout ?? DEFAULT_DIST_TIMEOUT_S) * 1000;
  const config = createHash('sha256').update(readFileSync(join(modelPath, 'config.json'))).update(JSON.stringify(args.jsonModelOverrideArgs)).digest('hex').slice(0, 12);
  const fingerprint = `tp_size=${args.tpSize} ep_size=${args.epSize} config.json#${config}`;
  logger.info(`node ${args.nodeRank} of ${args.nnodes}: joining through the TCP store at --dist-init-addr ${args.distInitAddr}${args.nodeRank === 0 ? ' (served here)' : ''}; ranks ${args.nodeRank * ranksPerNode}..${(args.nodeRank + 1) * ranksPerNode - 1} on this node`);
  const bootstrap = await bootstrapNodes({ nnodes: args.nnodes, nodeRank: args.nodeRank, distInitAddr: args.distInitAddr, timeoutMs, ranksPerNode, fingerprint });
  logger.info(`all ${args.nnodes} nodes joined (${bootstrap.nodes.map((n) => `node ${n.nodeRank}: ${n.addr}`).join(', ')})`);
  const tpNodes: TpNodes = {
    world: bootstrap.groupRef('world', args.tpSize),
    tp: bootstrap.groupRef('tp', args.tpSize),
    firstRank: bootstrap.firstRank,
    ranksPerNode,
  };
  return { bootstrap, tpNodes, timeoutMs };
}

/**
 * A node > 0: runs this node's ranks until node 0 shuts down, a node is lost, a rank fails or a signal arrives.
 * @returns the exit code: 0 after node 0's shutdown, 1 on a fault, 130/143 on SIGINT/SIGTERM
 */
export async function runFollowerNode(args: Readonly<ServerArgs>, modelPath: string, env: KernelEnv, cluster: Cluster, logger: Logger): Promise<number> {
  const { bootstrap } = cluster;
  logger.info(`node ${args.nodeRank}: no HTTP server on this node (node 0 serves); running TP ranks only`);
  const ranks = runNodeRanks({
    modelPath,
    overrides: args.jsonModelOverrideArgs,
    tpSize: args.tpSize,
    epSize: args.epSize,
    ...(args.numThreads !== null ? { threadsPerRank: args.numThreads } : {}),
    kernelEnv: env,
    kvCacheDtype: parseKvCacheDtype(args.kvCacheDtype) ?? 'auto',
    timeoutMs: cluster.timeoutMs,
    nodes: cluster.tpNodes,
    logger,
  });
  type Outcome = { kind: 'done' } | { kind: 'failed'; err: Error } | { kind: 'signal'; sig: string } | { kind: 'shutdown' };
  const outcome = await new Promise<Outcome>((resolve) => {
    ranks.then(() => resolve({ kind: 'done' }), (err: Error) => resolve({ kind: 'failed', err }));
    bootstrap.onFatal((err) => resolve({ kind: 'failed', err }));
    bootstrap.waitShutdown().then(() => resolve({ kind: 'shutdown' }), () => undefined);
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve({ kind: 'signal', sig }));
  });
  if (outcome.kind === 'shutdown') {
    // The ranks get node 0's shutdown step too; give them a moment to leave their loops.
    await Promise.race([ranks.catch(() => undefined), new Promise((r) => setTimeout(r, 5000).unref())]);
  }
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
