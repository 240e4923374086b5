package bench
import ("context";"testing";"time";clientv3 "go.etcd.io/etcd/client/v3")
func TestListProbeTmp(t *testing.T){
 c,err:=clientv3.New(clientv3.Config{Endpoints:[]string{"127.0.0.1:23790"}}); if err!=nil{t.Fatal(err)}
 defer c.Close()
 for _,opts:=range [][]clientv3.OpOption{{clientv3.WithPrefix(),clientv3.WithLimit(500)},{clientv3.WithPrefix(),clientv3.WithLimit(500),clientv3.WithKeysOnly()},{clientv3.WithPrefix(),clientv3.WithCountOnly()},{clientv3.WithPrefix(),clientv3.WithLimit(500),clientv3.WithSerializable()}}{
 t0:=time.Now(); r,err:=c.Get(context.Background(),"/registry/pods/",opts...); t.Log(time.Since(t0),err,len(r.Kvs),r.Count)}
}
