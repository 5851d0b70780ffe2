// A TCP store server as its own process (for namespaces, where the test process cannot be reached):
// argv[2] host, argv[3] port (0 = any); prints "listening PORT" and serves until killed.
import { TcpStoreServer } from '../../src/distributed/index.js';

const store = await TcpStoreServer.listen(process.argv[2], Number(process.argv[3] ?? 0));
process.stdout.write(`listening ${store.port}\n`);
